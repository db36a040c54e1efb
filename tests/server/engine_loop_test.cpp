// SPDX-License-Identifier: MIT
// The engine loop's wait for a burst (--batch-wait-us): requests that find the engine idle and arrive
// close together are prefilled in one step; without the wait the first one steps alone; a full
// batch does not wait; a request's arrival is when it was submitted, not when the loop took it; and each
// step tells its listener whether a stream started or ended.
#include "http/engine_loop.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "live_server.h"
#include "serve/step_observer.h"

using namespace servelab;
using namespace std::chrono_literals;

namespace {

// Which requests each step prefilled, and when each request arrived (engine clock).
class PrefillLog final : public StepObserver {
 public:
  void on_request(const RequestEvent& e) override {
    std::lock_guard lock(mutex_);
    if (e.kind == RequestEvent::Kind::ADDED) arrivals_.push_back(e.time);
  }
  void on_step(const StepRecord& r) override {
    std::vector<int> prefilled;
    for (const StepShare& s : r.scheduled)
      if (!s.decode) prefilled.push_back(s.request_id);
    std::lock_guard lock(mutex_);
    if (!prefilled.empty()) steps_.push_back(prefilled);
    step_starts_.push_back(r.start);
  }
  std::vector<std::vector<int>> prefill_steps() const {
    std::lock_guard lock(mutex_);
    return steps_;
  }
  std::vector<double> arrivals() const {
    std::lock_guard lock(mutex_);
    return arrivals_;
  }
  std::vector<double> step_starts() const {
    std::lock_guard lock(mutex_);
    return step_starts_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::vector<int>> steps_;
  std::vector<double> arrivals_, step_starts_;
};

struct LoopUnderTest {
  explicit LoopUnderTest(std::chrono::microseconds batch_wait, int max_num_seqs = 16)
      : model(load_chat_model()), engine(*model, config(max_num_seqs)) {
    engine.add_observer(&log);
    loop.emplace(engine, batch_wait);
  }
  static EngineConfig config(int max_num_seqs) {
    EngineConfig c;
    c.scheduler.max_num_seqs = max_num_seqs;
    return c;
  }
  std::shared_ptr<RequestStream> submit() {
    EngineRequest r;
    r.prompt = {1, 2, 3, 4, 5, 6, 7, 8};
    r.max_tokens = 2;
    return loop->submit(std::move(r));
  }
  static bool wait_finished(RequestStream& s) {
    for (int i = 0; i < 100 && !s.finished(); ++i) s.next(100ms);
    return s.finished();
  }
  /// Submits two requests @p apart and waits for both to finish.
  void two_arrivals(std::chrono::milliseconds apart) {
    auto a = submit();
    std::this_thread::sleep_for(apart);
    auto b = submit();
    REQUIRE(wait_finished(*a));
    REQUIRE(wait_finished(*b));
  }

  std::unique_ptr<Model> model;
  Engine engine;
  PrefillLog log;
  std::optional<EngineLoop> loop;  // last: its thread stops before the engine and the log go
};

}  // namespace

TEST_CASE("engine loop: requests that find the engine idle and arrive close together are prefilled in one step",
          "[server]") {
  LoopUnderTest t(1s);  // a quiet second: far longer than the 20 ms between the two arrivals
  t.two_arrivals(20ms);
  const auto steps = t.log.prefill_steps();
  REQUIRE(!steps.empty());
  CHECK(steps.front().size() == 2);
  // Each arrival is its submit(), not the step that took it: the second came 20 ms after the first.
  const auto arrivals = t.log.arrivals();
  REQUIRE(arrivals.size() == 2);
  CHECK(arrivals[1] - arrivals[0] >= 0.015);
  CHECK(t.log.step_starts().front() >= arrivals[1]);
}

TEST_CASE("engine loop: without the wait the first arrival is prefilled alone", "[server]") {
  LoopUnderTest t(0us);  // the same arrivals as above: 20 ms apart
  t.two_arrivals(20ms);
  const auto steps = t.log.prefill_steps();
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].size() == 1);
  CHECK(steps[1].size() == 1);
  CHECK(t.log.step_starts().front() < t.log.arrivals()[1]);  // a's step began before b was sent
}

TEST_CASE("engine loop: a burst that fills max_num_seqs steps without waiting out the quiet period", "[server]") {
  LoopUnderTest t(1s, 2);  // waiting would cost a second after the second arrival
  const auto start = std::chrono::steady_clock::now();
  auto a = t.submit();
  auto b = t.submit();
  REQUIRE(LoopUnderTest::wait_finished(*a));
  REQUIRE(LoopUnderTest::wait_finished(*b));
  CHECK(std::chrono::steady_clock::now() - start < 900ms);
  const auto steps = t.log.prefill_steps();
  REQUIRE(!steps.empty());
  CHECK(steps.front().size() == 2);
}

TEST_CASE("engine loop: a batch wait outside [0, 1 s] is refused by its flag's name", "[server]") {
  auto model = load_chat_model();
  Engine engine(*model, EngineConfig{});
  CHECK_THROWS_WITH(EngineLoop(engine, 2s), Catch::Contains("--batch-wait-us"));
  CHECK_THROWS_WITH(EngineLoop(engine, -1us), Catch::Contains("--batch-wait-us"));
}

TEST_CASE("engine loop: each step tells its listener whether a stream got its first token or ended", "[server]") {
  // The SSE writer holds the other tokens back under a stream interval (http/sse_writer.h); these two it must not.
  LoopUnderTest t(0us);
  std::mutex mutex;
  std::vector<bool> news;
  t.loop->on_step([&](bool n) {
    std::lock_guard lock(mutex);
    news.push_back(n);
  });
  EngineRequest r;
  r.prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  r.max_tokens = 4;
  auto s = t.loop->submit(std::move(r));
  REQUIRE(LoopUnderTest::wait_finished(*s));
  t.loop->shutdown();  // announced once more, with nothing left to end
  std::lock_guard lock(mutex);
  // The prefill's token, two decodes, the last token, the shutdown.
  CHECK(news == std::vector<bool>{true, false, false, true, false});
}
