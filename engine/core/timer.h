// SPDX-License-Identifier: MIT
/**
 * @file timer.h
 * @brief Wall-clock time in seconds from a monotonic clock, and timing of repeated runs.
 */
#pragma once

#include <chrono>
#include <functional>
#include <vector>

namespace servelab {

/// Seconds since an arbitrary fixed point of a monotonic clock.
inline double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
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
