// SPDX-License-Identifier: MIT
/**
 * @file thread_pool.h
 * @brief The engine's one pool of worker threads.
 *
 * Every threaded kernel goes through this pool, so the engine never runs
 * more compute threads than it was given (OpenBLAS, too, runs
 * single-threaded inside it: two pools on the same cores are several times
 * slower). The calling thread takes a share of the work, so a pool of N
 * uses N threads.
 *
 * A decode step issues about ten parallel loops per layer, each a few
 * microseconds long, so waking sleeping threads for each would cost more
 * than the loop. Idle workers therefore spin (with a pause instruction) for
 * a short while before they block on a condition variable.
 *
 * Cores may be shared with other processes (a build beside the server).
 * Then a worker can be off its core for a whole scheduler time slice
 * (milliseconds) when a loop starts, and a fixed chunk per thread would
 * make every loop wait for it. So the chunks are claimed, not assigned:
 * whoever is running takes the next unclaimed one, the caller included, and
 * a worker that has not started claims nothing. The caller waits only for
 * chunks already taken; it spins briefly, then sleeps until the last one is
 * done, giving its core to the thread it waits for. How long both spin
 * follows the load (SpinPolicy): up to 2 ms while the cores are not
 * oversubscribed, so that a light load's bursts are ridden out on a held
 * core, and 50-200 µs while they are. The chunk boundaries
 * depend only on the loop's size and the pool's, never on who runs them, so
 * results do not change.
 */
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/spin_policy.h"

namespace servelab {

/// Most threads a pool may start: far more than any CPU the engine runs on
/// has, far fewer than the thousands at which starting them fails.
inline constexpr int kMaxThreads = 1024;

/// Fixed-size pool running one data-parallel loop at a time.
class ThreadPool {
 public:
  /**
   * @brief Starts `num_threads - 1` workers (the caller is the last one).
   * @param num_threads total threads, in [1, kMaxThreads]; 0 means std::thread::hardware_concurrency().
   * @throws Error when @p num_threads is out of range or the system cannot start that many threads.
   */
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Total threads that run a parallel_for, the caller included.
  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  /**
   * @brief Runs `fn(begin, end)` over [0, n) split into one contiguous chunk per thread.
   *
   * The split depends only on @p n and the pool size. Blocks until every
   * chunk is done; an exception thrown by @p fn is rethrown here. Not
   * reentrant: @p fn must not call parallel_for on the same pool.
   * @param min_per_thread below 2 × this many items the caller runs them all
   *        itself: waking threads costs microseconds, more than a tiny loop.
   */
  void parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn,
                    std::size_t min_per_thread = 1);

 private:
  void worker_loop();
  void run_chunk(int index) noexcept;
  /// Claims and runs chunks of job number @p job until none is left (or another job has started).
  void run_claimed_chunks(std::uint64_t job) noexcept;

  /// Every kPolicyWindow, feeds the caller's scheduler counters to policy_ and publishes its choice.
  void update_spin_policy();

  void stop_workers() noexcept;  // wakes every worker, tells it to exit, and joins it
  std::vector<std::thread> workers_;
  const std::function<void(std::size_t, std::size_t)>* job_ = nullptr;  // published by generation_
  std::size_t job_n_ = 0;
  std::atomic<std::uint64_t> generation_{0};  // the job number, bumped once per parallel_for
  std::atomic<std::uint64_t> claims_{0};      // (job number << 32) | next unclaimed chunk; publishes job_
  std::atomic<int> done_{0};                  // chunks of the current job finished
  std::atomic<int> sleeping_{0};              // workers blocked on wake_
  std::atomic<bool> caller_sleeping_{false};  // the caller blocked on done_cv_
  std::atomic<bool> stop_{false};
  std::atomic<bool> spin_long_{false};  // policy_'s choice, read by the idle workers
  SpinPolicy policy_;                   // the caller's alone
  std::thread::id policy_thread_;       // whose counters policy_ holds
  std::chrono::steady_clock::time_point policy_read_at_;
  std::mutex mutex_;  // guards wake_, done_cv_ and error_
  std::condition_variable wake_;
  std::condition_variable done_cv_;
  std::exception_ptr error_;
};

}  // namespace servelab
