/**
 * @file thread_pool.h
 * @brief The engine's one pool of worker threads.
 *
 * Every threaded kernel goes through this pool, so the engine never runs
 * more compute threads than it was given (oversubscribing two cores with a
 * second pool is several times slower, see the CPU speed issue). The
 * calling thread takes a share of the work, so a pool of N uses N threads.
 */
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace servelab {

/// Fixed-size pool running one data-parallel loop at a time.
class ThreadPool {
 public:
  /**
   * @brief Starts `num_threads - 1` workers (the caller is the last one).
   * @param num_threads total threads, >= 1; 0 means std::thread::hardware_concurrency().
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
   * The split depends only on @p n and the pool size, so a loop whose body is
   * deterministic per index gives the same result on every run. Blocks until
   * every chunk is done. Exceptions thrown by @p fn are rethrown here.
   */
  void parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(std::size_t, std::size_t)>* job_ = nullptr;
  std::size_t job_n_ = 0;
  unsigned long generation_ = 0;  // bumped once per parallel_for
  int pending_ = 0;               // workers still running the current job
  std::exception_ptr error_;
  bool stop_ = false;
};

}  // namespace servelab
