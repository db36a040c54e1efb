// SPDX-License-Identifier: MIT
// Hidden lab 02 tests: the KV-bytes formula past 32 bits, and a long decode.
#include "model/model.h"
#include "perf/work.h"
#include "serve/generate.h"
#include "test_util.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;

TEST_CASE("hidden: Llama-3-70B's KV at 8k tokens and batch 16 needs 64-bit arithmetic", "[lab02][hidden]") {
  // 2 * 80 layers * 8 KV heads * 128 * 8192 * 16 * 2 bytes = 42,949,672,960
  CHECK(kv_cache_bytes(preset("llama-3-70b"), 8192, 16, DType::BF16) == 42949672960ull);
}

TEST_CASE("hidden: 60 decode steps after a 3-token prompt keep the recomputed tokens", "[lab02][hidden]") {
  ModelOptions options;
  options.deterministic = true;
  auto model = Model::from_preset("tiny", 4, options);
  const auto prompt = synthetic_prompt(3, model->config().vocab_size, 1);
  GenerateOptions gen;
  gen.max_new_tokens = 60;
  const auto cached = generate(*model, prompt, gen);
  gen.use_kv_cache = false;
  CHECK(generate(*model, prompt, gen).output_ids == cached.output_ids);
}
