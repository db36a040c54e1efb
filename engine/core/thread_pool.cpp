// SPDX-License-Identifier: MIT
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <system_error>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SERVELAB_CPU_RELAX() _mm_pause()
#else
#define SERVELAB_CPU_RELAX() std::this_thread::yield()
#endif

namespace servelab {

namespace {

// How long an idle worker spins before it sleeps: long enough to bridge the
// gaps between the loops of one model step, short enough not to burn a core
// while the engine waits for something else.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(200);

// Pause while a wait is short; once it is long the core is probably
// oversubscribed (another process, or more threads than cores), and giving it
// up lets the thread being waited for run.
inline void relax(int polls) {
  if (polls < 2000)
    SERVELAB_CPU_RELAX();
  else
    std::this_thread::yield();
}

std::pair<std::size_t, std::size_t> chunk(std::size_t n, int parts, int index) {
  return {n * static_cast<std::size_t>(index) / static_cast<std::size_t>(parts),
          n * static_cast<std::size_t>(index + 1) / static_cast<std::size_t>(parts)};
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  check(num_threads >= 0 && num_threads <= kMaxThreads, "--threads must be in [0, ", kMaxThreads,
        "] (0 = all cores), got ", num_threads);
  if (num_threads == 0) num_threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 1024u));
  try {
    for (int i = 0; i < num_threads - 1; ++i) workers_.emplace_back([this, i] { worker_loop(i + 1); });
  } catch (const std::system_error& e) {
    // The workers already started must be joined, or their destructors call std::terminate.
    const auto started = workers_.size();
    stop_workers();
    fail("cannot start ", num_threads, " threads (the system stopped at ", started + 1, ": ", e.what(),
         "); use a smaller --threads");
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() noexcept {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

void ThreadPool::run_chunk(int index) noexcept {
  const auto [begin, end] = chunk(job_n_, num_threads(), index);
  try {
    if (begin < end) (*job_)(begin, end);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker_loop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    auto idle_since = std::chrono::steady_clock::now();
    int polls = 0;
    while (generation_.load() == seen && !stop_.load()) {
      relax(++polls);
      if (polls % 256 != 0 || std::chrono::steady_clock::now() - idle_since < kSpinBeforeSleep) continue;
      // Sleep. seq_cst on sleeping_ and generation_ pairs with parallel_for's
      // bump-then-check, so a wake-up cannot be lost.
      std::unique_lock lock(mutex_);
      sleeping_.fetch_add(1);
      wake_.wait(lock, [&] { return generation_.load() != seen || stop_.load(); });
      sleeping_.fetch_sub(1);
      idle_since = std::chrono::steady_clock::now();
    }
    if (stop_.load()) return;
    seen = generation_.load();
    run_chunk(index);
    pending_.fetch_sub(1);
  }
}

void ThreadPool::parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn,
                              std::size_t min_per_thread) {
  if (workers_.empty() || n < 2 * std::max<std::size_t>(1, min_per_thread)) {
    if (n > 0) fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  error_ = nullptr;
  pending_.store(static_cast<int>(workers_.size()));
  generation_.fetch_add(1);  // publishes job_ and job_n_ to the workers
  if (sleeping_.load() > 0) {
    std::lock_guard lock(mutex_);
    wake_.notify_all();
  }
  run_chunk(0);
  // The other chunks are the same size: a short wait, unless a worker lost its core.
  for (int polls = 1; pending_.load() != 0; ++polls) relax(polls);
  std::exception_ptr error;
  {
    std::lock_guard lock(mutex_);
    error = error_;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace servelab
