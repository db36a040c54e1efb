// SPDX-License-Identifier: MIT
// Hidden lab 02 tests: the KV-bytes formula past 32 bits, and its growth per token.
#include "perf/work.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("hidden: Llama-3-70B's KV at 8k tokens and batch 16 needs 64-bit arithmetic", "[lab02][hidden]") {
  // 2 * 80 layers * 8 KV heads * 128 * 8192 * 16 * 2 bytes = 42,949,672,960
  CHECK(kv_cache_bytes(preset("llama-3-70b"), 8192, 16, DType::BF16) == 42949672960ull);
}

TEST_CASE("hidden: the cache's bytes grow by one token's K and V per token and per sequence", "[lab02][hidden]") {
  const ModelConfig c = preset("qwen2.5-0.5b");
  const std::uint64_t token = kv_cache_bytes(c, 1, 1, DType::F32);
  CHECK(kv_cache_bytes(c, 513, 1, DType::F32) - kv_cache_bytes(c, 512, 1, DType::F32) == token);
  CHECK(kv_cache_bytes(c, 512, 5, DType::F32) == 5 * kv_cache_bytes(c, 512, 1, DType::F32));
}
