// SPDX-License-Identifier: MIT
#include <atomic>
#include <chrono>
#include <thread>
#include <stdexcept>

#include "core/error.h"
#include "core/thread_pool.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("parallel_for visits every index exactly once", "[thread_pool]") {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    CHECK(pool.num_threads() == threads);
    for (std::size_t n : {0u, 1u, 2u, 17u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) hits[i]++;
      });
      for (std::size_t i = 0; i < n; ++i) CHECK(hits[i] == 1);
    }
  }
}

TEST_CASE("an exception in a worker reaches the caller and the pool stays usable", "[thread_pool]") {
  ThreadPool pool(2);
  CHECK_THROWS_AS(pool.parallel_for(100,
                                    [](std::size_t b, std::size_t) {
                                      if (b > 0) throw std::runtime_error("worker failed");
                                    }),
                  std::runtime_error);
  std::atomic<int> sum{0};
  pool.parallel_for(10, [&](std::size_t b, std::size_t e) { sum += static_cast<int>(e - b); });
  CHECK(sum == 10);
}

TEST_CASE("workers that went to sleep between loops wake up for the next one", "[thread_pool]") {
  ThreadPool pool(2);
  for (int round = 0; round < 3; ++round) {
    // Longer than the pool's spin window, so the worker blocks on its condition variable.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<std::atomic<int>> hits(64);
    pool.parallel_for(hits.size(), [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) hits[i]++;
    });
    for (auto& h : hits) CHECK(h == 1);
  }
}

// --threads 100000 used to abort in std::thread's constructor (an uncaught
// std::system_error, with 1000s of threads already running).
TEST_CASE("a thread count out of range is an Error naming --threads", "[thread_pool][bad-input]") {
  REQUIRE_ERROR_MENTIONS(ThreadPool(100000), "--threads must be in [0, 1024]", "got 100000");
  REQUIRE_ERROR_MENTIONS(ThreadPool(-1), "--threads must be in [0, 1024]", "got -1");
}
