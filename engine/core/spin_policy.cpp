// SPDX-License-Identifier: MIT
#include "core/spin_policy.h"

#include <cstdio>

namespace servelab {

std::optional<SchedStat> thread_sched_stat() {
#if defined(__linux__)
  // Three numbers: ns on a CPU, ns waiting on a run queue, time slices. Absent without
  // CONFIG_SCHED_INFO, and /proc/thread-self needs Linux 3.17.
  std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (!f) return std::nullopt;
  unsigned long long run = 0, delay = 0;
  const int read = std::fscanf(f, "%llu %llu", &run, &delay);
  std::fclose(f);
  if (read != 2) return std::nullopt;
  return SchedStat{run, delay};
#else
  return std::nullopt;
#endif
}

void SpinPolicy::observe(SchedStat now) {
  if (!start_ || now.run_ns < start_->run_ns || now.delay_ns < start_->delay_ns) {
    start_ = now;
    return;
  }
  const std::uint64_t run = now.run_ns - start_->run_ns, delay = now.delay_ns - start_->delay_ns;
  if (run + delay < kMinWindowNs) return;
  start_ = now;
  const double share = static_cast<double>(delay) / static_cast<double>(run + delay);
  // An eighth's weight per window: a window holds a few time slices, so one alone says little
  // (beside a light load most read 0 and one in ten over 0.3), yet a load that starts or stops
  // is followed within about 100 ms.
  waiting_share_ = waiting_share_ < 0 ? share : waiting_share_ + (share - waiting_share_) / 8;
  // Apart thresholds, so that an average near one of them does not flip the spin every window.
  if (spin_long_ && waiting_share_ > kLeaveLong) spin_long_ = false;
  if (!spin_long_ && waiting_share_ < kEnterLong) spin_long_ = true;
}

}  // namespace servelab
