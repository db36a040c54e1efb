// SPDX-License-Identifier: MIT
/**
 * @file timer.h
 * @brief Wall-clock time in seconds from a monotonic clock, the process's CPU time, and timing of repeated runs.
 */
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <functional>
#include <vector>

namespace servelab {

/// Seconds since an arbitrary fixed point of a monotonic clock.
inline double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

/// CPU seconds this process has used so far, user and system, every thread's (getrusage(RUSAGE_SELF)).
inline double process_cpu_seconds() {
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;  // cannot fail for RUSAGE_SELF
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

/**
 * @brief Runs @p fn @p warmup times untimed, then @p repeats times timed.
 * @return wall-clock seconds of each timed run (@p fn must finish its work,
 *         a GPU's included, before it returns).
 */
inline std::vector<double> time_runs(int warmup, int repeats, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    const double start = now_seconds();
    fn();
    seconds.push_back(now_seconds() - start);
  }
  return seconds;
}

}  // namespace servelab
