// SPDX-License-Identifier: MIT
/**
 * @file spin_policy.h
 * @brief How long the thread pool's threads spin before they sleep, chosen
 *        from how long the engine's thread waits for a core.
 *
 * A thread that spins keeps its core, so the next loop starts at once; a
 * thread that sleeps gives its core away and is woken later. Which is
 * better depends on who else wants the cores:
 *
 * - a light load beside the engine (a client taking a quarter of a core in
 *   short bursts) preempts one of the pool's threads for a millisecond at a
 *   time; a waiting thread that spins through it holds a core no one else
 *   needed, and the step goes on the moment the other thread is back;
 * - a heavy load (a build, as many busy processes as cores) keeps every
 *   core wanted; a spinning thread then holds the core the thread it waits
 *   for needs, and the step slows by a quarter or more.
 *
 * The kernel tells the two apart: it counts, per thread, the time spent
 * runnable but waiting for a core (Linux's `/proc/thread-self/schedstat`,
 * its second field). On a 2-core Zen 3 decoding with 2 threads, the engine's
 * thread waited about 1% of its runnable time on a quiet machine, about 10%
 * beside a Python loop busy 1 ms in every 3.5 (most 10 ms windows 0, one in
 * ten over 0.3), and 45-50% beside one or two busy processes. Spinning long
 * was 8% faster beside the loop and 7-25% slower beside one busy process.
 * So the pool spins long while the averaged share stays low, and briefly
 * once it is high.
 */
#pragma once

#include <cstdint>
#include <optional>

namespace servelab {

/// One thread's scheduler counters, in nanoseconds since it started.
struct SchedStat {
  std::uint64_t run_ns = 0;    ///< time on a CPU
  std::uint64_t delay_ns = 0;  ///< time runnable but waiting on a run queue
};

/// The calling thread's counters (Linux), or nullopt where the kernel does not expose them.
std::optional<SchedStat> thread_sched_stat();

/// Chooses between a long and a short spin from a thread's waiting share, averaged over windows.
class SpinPolicy {
 public:
  /// Below this averaged share of runnable time spent waiting for a core, the threads spin long.
  static constexpr double kEnterLong = 0.2;
  /// Above this one, the cores count as oversubscribed and the threads spin briefly.
  static constexpr double kLeaveLong = 0.3;
  /// Windows with less runnable time than this (the thread mostly slept) are merged into the next one.
  static constexpr std::uint64_t kMinWindowNs = 2'000'000;

  /**
   * @brief Takes the counters of the thread that calls the pool, read at the end of a window.
   *
   * The first call only sets the start. A call whose counters are not later
   * than the last ones (another thread's, or a wrapped counter) starts over.
   */
  void observe(SchedStat now);

  /// Whether to spin long: false before any full window, then true once the averaged share falls
  /// below kEnterLong, until it rises above kLeaveLong.
  bool spin_long() const { return spin_long_; }

  /// The averaged share of runnable time spent waiting for a core, in [0, 1]; negative before any full window.
  double waiting_share() const { return waiting_share_; }

 private:
  std::optional<SchedStat> start_;
  double waiting_share_ = -1;
  bool spin_long_ = false;
};

}  // namespace servelab
