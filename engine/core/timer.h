/**
 * @file timer.h
 * @brief Wall-clock time in seconds from a monotonic clock, for step timings.
 */
#pragma once

#include <chrono>

namespace servelab {

/// Seconds since an arbitrary fixed point of a monotonic clock.
inline double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

}  // namespace servelab
