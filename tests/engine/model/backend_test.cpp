// SPDX-License-Identifier: MIT
// Choosing a backend: the CPU model makes host KV caches, and asking for
// CUDA where there is no device is one clear error. (tests/gpu runs the CUDA
// backend itself where a GPU exists.)
#include "core/error.h"
#include "cuda/device_probe.h"
#include "model/model.h"
#include "model/sampler.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("asking for --backend cuda without a device says so and names the flag", "[backend]") {
  if (cuda_device_count() > 0) return;  // a GPU machine: tests/gpu covers the backend there
  ModelOptions options;
  options.backend = Backend::CUDA;
  REQUIRE_ERROR_MENTIONS(Model::from_preset("tiny", 0, options), "--backend cuda", "no usable CUDA device",
                         "use --backend cpu");
}

TEST_CASE("the CPU model makes host caches of the size asked for", "[backend]") {
  auto model = Model::from_preset("tiny", 0, ModelOptions{});
  const auto cache = model->make_kv_cache(3, 10);
  REQUIRE(dynamic_cast<HostKVCache*>(cache.get()) != nullptr);
  CHECK_FALSE(cache->on_device());
  CHECK(cache->num_blocks() == 3);
  CHECK(cache->block_size() == 10);
  REQUIRE_ERROR_MENTIONS(model->make_kv_cache(0, 10), "--num-blocks must be positive");
  REQUIRE_ERROR_MENTIONS(model->make_kv_cache(3, -1), "--block-size must be positive");
  REQUIRE_ERROR_MENTIONS(model->device_kv_memory(0.9), "--gpu-memory-utilization", "--kv-cache-memory");
}

TEST_CASE("forward_greedy returns each logits row's argmax and counts the step once", "[backend]") {
  // The seam the engine uses for greedy steps (on CUDA the argmax runs on the device; here on the host).
  auto model = Model::from_preset("tiny", 0, ModelOptions{});
  const int V = model->config().vocab_size;
  auto cache = model->make_kv_cache(1, 16);
  const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5};
  Batch batch;
  batch.add({0}, 0, prompt, LogitsFor::All);
  const auto logits = model->forward(batch, *cache);
  const auto tokens = model->forward_greedy(batch, *cache);
  REQUIRE(tokens.size() == prompt.size());
  for (std::size_t r = 0; r < tokens.size(); ++r)
    CHECK(tokens[r] == argmax(std::span(logits).subspan(r * V, static_cast<std::size_t>(V))));
  model->work_counter().reset();
  model->work_counter().enable(true);
  model->forward(batch, *cache);
  const Work once = model->work_counter().total();
  REQUIRE(once.flops > 0);
  model->work_counter().reset();
  model->work_counter().enable(true);
  model->forward_greedy(batch, *cache);
  CHECK(model->work_counter().total().flops == once.flops);  // not counted twice
  // A step with no logits rows returns none.
  Batch none;
  none.add({0}, 0, prompt, LogitsFor::None);
  CHECK(model->forward_greedy(none, *cache).empty());
}
