// SPDX-License-Identifier: MIT
// Hidden lab 01 tests: the loop's edge cases and the sampler's limits.
#include "model/model.h"
#include "model/sampler.h"
#include "serve/generate.h"
#include "test_util.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;

TEST_CASE("hidden: one new token, a one-token prompt, and a stop token first", "[lab01][hidden]") {
  auto model = Model::from_preset("tiny", 3, ModelOptions{});
  const auto prompt = synthetic_prompt(1, model->config().vocab_size, 9);
  HostKVCache cache(model->config(), 1, 8);
  GenerateOptions gen;
  gen.max_new_tokens = 1;
  gen.use_kv_cache = false;
  const GenerateResult one = generate_loop(*model, cache, prompt, gen);
  REQUIRE(one.output_ids.size() == 1);
  CHECK(one.step_tokens == std::vector<int>{1});
  gen.max_new_tokens = 7;
  gen.stop_token_ids = {one.output_ids[0]};
  CHECK(generate_loop(*model, cache, prompt, gen).output_ids == one.output_ids);
}

TEST_CASE("hidden: top_k larger than the vocabulary keeps every token", "[lab01][hidden]") {
  Sampler s({1.0f, 50, 1.0f, 8});
  std::vector<int> seen(3, 0);
  for (int i = 0; i < 3000; ++i) seen[static_cast<std::size_t>(s.sample(std::vector<float>{0.0f, 0.0f, 0.0f}))]++;
  for (int c : seen) CHECK(c > 800);
}
