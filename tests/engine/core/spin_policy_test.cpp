// SPDX-License-Identifier: MIT
// The thread pool's choice between spinning long and briefly, from the scheduler counters of the
// thread that calls it: fed made-up windows here, and the real counters of this thread in a
// test of its own that reports SKIP where the kernel does not expose them.
#include <ctime>
#include <iostream>

#include "core/spin_policy.h"
#include "test_util.h"

using namespace servelab;

namespace {

constexpr std::uint64_t kMs = 1'000'000;

// Feeds windows of 10 ms of runnable time with @p delay_share of it spent waiting, from @p at on.
SchedStat feed(SpinPolicy& policy, SchedStat at, double delay_share, int windows) {
  for (int i = 0; i < windows; ++i) {
    const auto delay = static_cast<std::uint64_t>(10 * kMs * delay_share);
    at = {at.run_ns + 10 * kMs - delay, at.delay_ns + delay};
    policy.observe(at);
  }
  return at;
}

}  // namespace

TEST_CASE("the spin is brief until a first window has been measured", "[spin_policy]") {
  SpinPolicy policy;
  CHECK_FALSE(policy.spin_long());
  policy.observe({5 * kMs, 0});  // the start only
  CHECK_FALSE(policy.spin_long());
  CHECK(policy.waiting_share() < 0);
  policy.observe({15 * kMs, 0});
  CHECK(policy.waiting_share() == 0);
  CHECK(policy.spin_long());
}

TEST_CASE("the share is the delay over run plus delay, averaged with an eighth's weight", "[spin_policy]") {
  SpinPolicy policy;
  SchedStat at = feed(policy, {}, 0.0, 2);  // the start, then a first window that sets the average
  at = feed(policy, at, 0.4, 1);            // run 6 ms, delay 4 ms: share 0.4, not 4/6
  CHECK(policy.waiting_share() == Approx(0.4 / 8));
  feed(policy, at, 0.4, 1);
  CHECK(policy.waiting_share() == Approx(0.05 + (0.4 - 0.05) / 8));
}

TEST_CASE("oversubscribed windows turn the long spin off, and it comes back only well below", "[spin_policy]") {
  SpinPolicy policy;
  SchedStat at = feed(policy, {}, 0.0, 2);
  REQUIRE(policy.spin_long());
  // Beside one or two busy processes about half of the runnable time is spent waiting.
  at = feed(policy, at, 0.5, 3);
  CHECK(policy.spin_long());  // a few windows do not move the average past kLeaveLong
  at = feed(policy, at, 0.5, 20);
  CHECK(policy.waiting_share() > SpinPolicy::kLeaveLong);
  CHECK_FALSE(policy.spin_long());
  // Between the thresholds the choice stays as it is, whichever way the average moves.
  at = feed(policy, at, 0.25, 60);
  CHECK(policy.waiting_share() == Approx(0.25).margin(0.01));
  CHECK_FALSE(policy.spin_long());
  at = feed(policy, at, 0.0, 60);
  CHECK(policy.spin_long());
  feed(policy, at, 0.25, 60);
  CHECK(policy.waiting_share() == Approx(0.25).margin(0.01));
  CHECK(policy.spin_long());
}

TEST_CASE("a window in which the thread mostly slept is merged into the next", "[spin_policy]") {
  SpinPolicy policy;
  policy.observe({});
  policy.observe({kMs / 2, kMs / 2});  // 1 ms runnable: too little to judge, nothing changes
  CHECK(policy.waiting_share() < 0);
  policy.observe({kMs, 2 * kMs});  // 3 ms runnable since the start, 2 of them waiting
  CHECK(policy.waiting_share() == Approx(2.0 / 3));
}

TEST_CASE("counters that go back (another thread's) start over instead of making a window", "[spin_policy]") {
  SpinPolicy policy;
  feed(policy, {100 * kMs, 100 * kMs}, 0.0, 3);
  REQUIRE(policy.waiting_share() == 0);
  policy.observe({20 * kMs, 90 * kMs});  // a thread that started later: the start only
  CHECK(policy.waiting_share() == 0);
  feed(policy, {20 * kMs, 90 * kMs}, 0.8, 1);  // measured from that start
  CHECK(policy.waiting_share() == Approx(0.8 / 8));
}

// Hidden ([.]): tests/engine/CMakeLists.txt runs it with a SKIP pattern for kernels without the file.
TEST_CASE("this thread's run time in its scheduler counters grows with its CPU time", "[.][sched-stat]") {
  const auto before = thread_sched_stat();
  if (!before) {
    std::cout << "SKIP: this kernel does not expose /proc/thread-self/schedstat\n";
    return;
  }
  timespec start{}, now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  const auto cpu_ns = [&] {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (now.tv_sec - start.tv_sec) * 1'000'000'000LL + (now.tv_nsec - start.tv_nsec);
  };
  while (cpu_ns() < 20'000'000) {
  }
  const auto after = thread_sched_stat();
  REQUIRE(after);
  CHECK(after->run_ns - before->run_ns >= 19 * kMs);
  CHECK(after->run_ns - before->run_ns < 1000 * kMs);
  CHECK(after->delay_ns >= before->delay_ns);
}
