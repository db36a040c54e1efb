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

// How long an idle worker spins before it sleeps, and how long the caller spins for the chunks
// other threads have taken before it sleeps until the last one is done. Briefly while the cores
// are oversubscribed (SpinPolicy): equal chunks finish within microseconds of each other, a thread
// that takes longer has lost its core, and spinning on would keep the core that thread may be
// waiting for. Long otherwise: the worker bridges the gaps between the loops of one step, and both
// ride out the millisecond for which a light load beside the engine takes a core.
constexpr auto kWorkerSpinShort = std::chrono::microseconds(200);
constexpr auto kCallerSpinShort = std::chrono::microseconds(50);
constexpr auto kSpinLong = std::chrono::microseconds(2000);

// How often the caller reads its scheduler counters: a few time slices, and a few syscalls a second.
constexpr auto kPolicyWindow = std::chrono::milliseconds(10);

std::pair<std::size_t, std::size_t> chunk(std::size_t n, int parts, int index) {
  return {n * static_cast<std::size_t>(index) / static_cast<std::size_t>(parts),
          n * static_cast<std::size_t>(index + 1) / static_cast<std::size_t>(parts)};
}

// claims_ packs (job number << 32) | next unclaimed chunk, so a claim for a job that has ended fails.
constexpr std::uint64_t claims_of(std::uint64_t job, int next) { return job << 32 | static_cast<std::uint32_t>(next); }

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  check(num_threads >= 0 && num_threads <= kMaxThreads, "--threads must be in [0, ", kMaxThreads,
        "] (0 = all cores), got ", num_threads);
  if (num_threads == 0) num_threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 1024u));
  try {
    for (int i = 0; i < num_threads - 1; ++i) workers_.emplace_back([this] { worker_loop(); });
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

void ThreadPool::run_claimed_chunks(std::uint64_t job) noexcept {
  const int parts = num_threads();
  std::uint64_t claims = claims_.load();
  for (;;) {
    const int next = static_cast<int>(claims & 0xffffffffu);
    if (claims >> 32 != (job & 0xffffffffu) || next >= parts) return;  // that job is over, or every chunk is taken
    if (!claims_.compare_exchange_weak(claims, claims_of(job, next + 1))) continue;
    run_chunk(next);
    // The last chunk done wakes a caller that went to sleep waiting for it.
    if (done_.fetch_add(1) + 1 == parts && caller_sleeping_.load()) {
      std::lock_guard lock(mutex_);
      done_cv_.notify_one();
    }
    claims = claims_.load();
  }
}

void ThreadPool::worker_loop() {
  std::uint64_t seen = 0;
  for (;;) {
    auto idle_since = std::chrono::steady_clock::now();
    int polls = 0;
    while (generation_.load() == seen && !stop_.load()) {
      SERVELAB_CPU_RELAX();
      if (++polls % 256 != 0) continue;
      const auto spin = spin_long_.load(std::memory_order_relaxed) ? kSpinLong : kWorkerSpinShort;
      if (std::chrono::steady_clock::now() - idle_since < spin) continue;
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
    run_claimed_chunks(seen);
  }
}

void ThreadPool::update_spin_policy() {
  const auto now = std::chrono::steady_clock::now();
  if (now - policy_read_at_ < kPolicyWindow) return;
  policy_read_at_ = now;
  // Counters are per thread: a new caller starts a new average.
  if (std::this_thread::get_id() != policy_thread_) {
    policy_thread_ = std::this_thread::get_id();
    policy_ = SpinPolicy();
  }
  if (const auto stat = thread_sched_stat()) policy_.observe(*stat);
  spin_long_.store(policy_.spin_long(), std::memory_order_relaxed);
}

void ThreadPool::parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn,
                              std::size_t min_per_thread) {
  if (workers_.empty() || n < 2 * std::max<std::size_t>(1, min_per_thread)) {
    if (n > 0) fn(0, n);
    return;
  }
  update_spin_policy();
  const int parts = num_threads();
  job_ = &fn;
  job_n_ = n;
  error_ = nullptr;
  done_.store(0);
  const std::uint64_t job = generation_.load() + 1;
  claims_.store(claims_of(job, 0));  // publishes job_ and job_n_ to whoever claims a chunk of this job
  generation_.store(job);            // wakes the spinning workers
  if (sleeping_.load() > 0) {
    std::lock_guard lock(mutex_);
    wake_.notify_all();
  }
  // The caller takes chunks too, and every chunk no worker has taken yet: a worker that has not
  // started (its core is busy with another process) then delays nothing.
  run_claimed_chunks(job);
  const auto spin = spin_long_.load(std::memory_order_relaxed) ? kSpinLong : kCallerSpinShort;
  const auto spin_since = std::chrono::steady_clock::now();
  for (int polls = 1; done_.load() != parts; ++polls) {
    SERVELAB_CPU_RELAX();
    if (polls % 64 != 0 || std::chrono::steady_clock::now() - spin_since < spin) continue;
    // A chunk's thread lost its core: sleep until it is done. seq_cst on caller_sleeping_ and
    // done_ pairs with run_claimed_chunks' add-then-check, so the wake-up cannot be lost.
    std::unique_lock lock(mutex_);
    caller_sleeping_.store(true);
    done_cv_.wait(lock, [&] { return done_.load() == parts; });
    caller_sleeping_.store(false);
  }
  std::exception_ptr error;
  {
    std::lock_guard lock(mutex_);
    error = error_;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace servelab
