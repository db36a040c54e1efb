// Choosing a backend: the CPU model makes host KV caches, and asking for
// CUDA where there is no device is one clear error. (tests/gpu runs the CUDA
// backend itself where a GPU exists.)
#include "core/error.h"
#include "cuda/device_probe.h"
#include "model/model.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("asking for --backend cuda without a device says so and names the flag", "[backend]") {
  if (cuda_device_count() > 0) return;  // a GPU machine: tests/gpu covers the backend there
  EngineOptions options;
  options.backend = Backend::CUDA;
  REQUIRE_ERROR_MENTIONS(Model::from_preset("tiny", 0, options), "--backend cuda", "no usable CUDA device",
                         "use --backend cpu");
}

TEST_CASE("the CPU model makes host caches of the size asked for", "[backend]") {
  auto model = Model::from_preset("tiny", 0, EngineOptions{});
  const auto cache = model->make_kv_cache(3, 10);
  REQUIRE(dynamic_cast<HostKVCache*>(cache.get()) != nullptr);
  CHECK_FALSE(cache->on_device());
  CHECK(cache->num_blocks() == 3);
  CHECK(cache->block_size() == 10);
  REQUIRE_ERROR_MENTIONS(model->make_kv_cache(0, 10), "--num-blocks must be positive");
  REQUIRE_ERROR_MENTIONS(model->make_kv_cache(3, -1), "--block-size must be positive");
  REQUIRE_ERROR_MENTIONS(model->device_kv_memory(0.9), "--gpu-memory-utilization", "--kv-cache-memory");
}
