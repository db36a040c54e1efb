// SPDX-License-Identifier: MIT
// Graded tests of what a lab 01 student writes (the LAB01 regions: a step of
// the loop without a cache, argmax and the sampler). Each one fails on the wrong
// implementations in tests/labs/mutants/lab01/. No timing is asserted.
#include <cmath>
#include <map>

#include "model/model.h"
#include "model/sampler.h"
#include "serve/generate.h"
#include "graded.h"
#include "test_util.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;

namespace {

// Frequencies of @p draws samples of @p logits from one seeded sampler.
std::map<int, double> frequencies(const SamplingParams& params, const std::vector<float>& logits, int draws) {
  Sampler s(params);
  std::map<int, double> f;
  for (int i = 0; i < draws; ++i) f[s.sample(logits)] += 1.0 / draws;
  return f;
}

}  // namespace

TEST_CASE("generate_loop without a cache feeds prompt + k - 1 tokens at step k and stops after a stop token",
          "[lab01][graded]") {
  auto model = test::deterministic_tiny();
  const auto prompt = synthetic_prompt(9, model->config().vocab_size, 5);
  test::at_greedy_and_sampled(12, 11, [&](GenerateOptions gen) {
    gen.use_kv_cache = false;
    // The oracle: a whole forward pass per token with no cache, one seeded sampler for the run.
    std::vector<std::int32_t> expected(prompt.begin(), prompt.end());
    Sampler oracle(gen.sampling);
    for (int k = 0; k < 12; ++k) {
      Batch batch;
      batch.add({0}, 0, expected);
      expected.push_back(oracle.sample(model->forward(batch)));
    }
    expected.erase(expected.begin(), expected.begin() + 9);
    HostKVCache cache(model->config(), 1, 9 + 12);
    std::vector<std::int32_t> streamed;
    const GenerateResult r = generate_loop(*model, cache, prompt, gen, [&](std::int32_t t) { streamed.push_back(t); });
    CHECK(r.output_ids == expected);
    CHECK(streamed == r.output_ids);
    CHECK(r.prompt_tokens == 9);
    REQUIRE(r.step_tokens.size() == 12);
    for (int k = 1; k <= 12; ++k) CHECK(r.step_tokens[k - 1] == 9 + k - 1);
    CHECK(r.step_seconds.size() == 12);
    // A stop token ends generation right after it is emitted.
    gen.stop_token_ids = {expected[4]};
    const GenerateResult stopped = generate_loop(*model, cache, prompt, gen);
    const auto first = std::find(expected.begin(), expected.end(), expected[4]);
    CHECK(stopped.output_ids == std::vector<std::int32_t>(expected.begin(), first + 1));
    CHECK(stopped.step_tokens.size() == stopped.output_ids.size());
  });
}

TEST_CASE("greedy is argmax: the largest logit, the lowest id on a tie, never a NaN", "[lab01][graded]") {
  CHECK(argmax(std::vector<float>{2.0f, 1.0f}) == 0);
  CHECK(argmax(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}) == 1);
  CHECK(argmax(std::vector<float>{NAN, -1.0f, NAN, 2.0f, NAN}) == 3);
  CHECK(argmax(std::vector<float>{NAN, NAN}) == 0);
  CHECK(argmax(std::vector<float>{}) == 0);
  Sampler greedy(SamplingParams{});
  CHECK(greedy.sample(std::vector<float>{-1.0f, 4.0f, 4.0f, 0.0f}) == 1);
}

TEST_CASE("the sampler draws softmax(logits / T) cut to the top k or the top-p nucleus", "[lab01][graded]") {
  const int n = 20000;  // binomial std at p = 0.5 is 0.0035: a 0.015 margin is over 4 sigma
  // T = 0.5 squares the odds: logits {0, ln 2} give 1 : 4.
  auto f = frequencies({0.5f, 0, 1.0f, 1}, {0.0f, std::log(2.0f)}, n);
  CHECK(f[0] == Approx(0.2).margin(0.015));
  CHECK(f[1] == Approx(0.8).margin(0.015));
  // top_k = 2 of four: only the two best, in their renormalised ratio 0.4 : 0.3.
  const std::vector<float> four = {std::log(0.1f), std::log(0.4f), std::log(0.3f), std::log(0.2f)};
  f = frequencies({1.0f, 2, 1.0f, 2}, four, n);
  CHECK(f.count(0) == 0);
  CHECK(f.count(3) == 0);
  CHECK(f[1] == Approx(0.4 / 0.7).margin(0.015));
  // top_p = 0.7 over {0.5, 0.3, 0.2}: the nucleus {0, 1}, renormalised to 0.625 : 0.375.
  f = frequencies({1.0f, 0, 0.7f, 3}, {std::log(0.5f), std::log(0.3f), std::log(0.2f)}, n);
  CHECK(f.count(2) == 0);
  CHECK(f[0] == Approx(0.625).margin(0.015));
  // top_k = 1 on a tie keeps the lower id; a temperature so small it underflows is greedy.
  f = frequencies({1.0f, 1, 1.0f, 4}, {1.0f, 3.0f, 3.0f}, 200);
  CHECK(f[1] == Approx(1.0));
  f = frequencies({1e-38f, 0, 1.0f, 5}, {0.5f, 5.0f, -3.0f, 4.0f}, 200);
  CHECK(f[1] == Approx(1.0));
}
