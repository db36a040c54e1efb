// SPDX-License-Identifier: MIT
// generate(): invariants between equivalent paths (cache on/off, batched vs
// alone), streaming, stop tokens, and refusal of bad requests before any work.
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "serve/generate.h"
#include "test_util.h"

using namespace servelab;

namespace {

std::unique_ptr<Model> synthetic_model(const std::string& name, int kv_heads, bool deterministic) {
  ModelConfig c = preset(name);
  if (kv_heads > 0) c.num_key_value_heads = kv_heads;
  ThreadPool pool(2);
  ModelOptions options;
  options.deterministic = deterministic;
  return std::make_unique<Model>(c, synthetic_weights(c, 11, pool), options);
}

const std::vector<std::int32_t> kPrompt = {5, 77, 301, 12, 9, 460, 33};

}  // namespace

TEST_CASE("deterministic mode: KV cache on and off generate the same tokens (MHA / GQA / MQA)",
          "[generate][deterministic]") {
  for (auto [name, kv_heads] : {std::pair{"tiny", 4}, {"tiny", 2}, {"tiny", 1}, {"tiny-llama", 0}}) {
    DYNAMIC_SECTION(name << " kv_heads " << kv_heads) {
      auto model = synthetic_model(name, kv_heads, true);
      GenerateOptions options;
      options.max_new_tokens = 24;
      const auto on = generate(*model, kPrompt, options);
      options.use_kv_cache = false;
      const auto off = generate(*model, kPrompt, options);
      CHECK(on.output_ids == off.output_ids);
      // Without a cache every step feeds the whole sequence; with it only the newest token.
      CHECK(off.step_tokens.back() == static_cast<int>(kPrompt.size()) + 23);
      CHECK(on.step_tokens.back() == 1);
      CHECK(on.step_tokens.front() == static_cast<int>(kPrompt.size()));
    }
  }
}

TEST_CASE("a ragged batch gives each sequence exactly the logits it gets alone", "[generate][deterministic]") {
  auto model = synthetic_model("tiny", 0, true);
  const std::vector<std::int32_t> a = {1, 2, 3, 4, 5}, b = {9, 8, 7};
  auto alone = [&](const std::vector<std::int32_t>& tokens) {
    HostKVCache cache(model->config(), 1, 16);
    Batch batch;
    batch.add({0}, 0, tokens);
    return model->forward(batch, cache);
  };
  // One batch mixing a 5-token prefill (slot 0) and a 3-token prefill (slot 1).
  HostKVCache cache(model->config(), 2, 16);
  Batch mixed;
  mixed.add({0}, 0, a);
  mixed.add({1}, 0, b);
  const auto both = model->forward(mixed, cache);
  const int V = model->config().vocab_size;
  CHECK(std::vector<float>(both.begin(), both.begin() + V) == alone(a));
  CHECK(std::vector<float>(both.begin() + V, both.end()) == alone(b));
  // Then a decode step for slot 1 alongside a 1-token chunk for slot 0, in one call.
  Batch step;
  const std::int32_t next_a = 42, next_b = 43;
  step.add({1}, 3, std::span(&next_b, 1));
  step.add({0}, 5, std::span(&next_a, 1));
  const auto out = model->forward(step, cache);
  auto b2 = b;
  b2.push_back(next_b);
  const auto full_b = alone(b2);
  CHECK(std::vector<float>(out.begin(), out.begin() + V) == full_b);
}

TEST_CASE("tokens stream through the callback in order - a stop token ends generation", "[generate]") {
  auto model = synthetic_model("tiny", 0, false);
  GenerateOptions options;
  options.max_new_tokens = 10;
  std::vector<std::int32_t> streamed;
  const auto r = generate(*model, kPrompt, options, [&](std::int32_t t) { streamed.push_back(t); });
  CHECK(streamed == r.output_ids);
  REQUIRE(r.output_ids.size() == 10);
  CHECK(r.step_seconds.size() == 10);
  CHECK(r.ttft() > 0.0);
  options.stop_token_ids = {r.output_ids[3]};
  const auto stopped = generate(*model, kPrompt, options);
  // Stops at the first occurrence of that token, which may come before index 3.
  CHECK(stopped.output_ids.size() <= 4);
  CHECK(stopped.output_ids.back() == r.output_ids[3]);
}

TEST_CASE("bad requests are refused before any step runs", "[generate][bad-input]") {
  auto model = synthetic_model("tiny", 0, false);  // max_position_embeddings 1024, vocab 512
  GenerateOptions options;
  REQUIRE_ERROR_MENTIONS(generate(*model, std::vector<std::int32_t>{}, options), "prompt is empty");
  REQUIRE_ERROR_MENTIONS(generate(*model, std::vector<std::int32_t>{1, 512}, options), "512", "vocabulary");
  std::vector<std::int32_t> long_prompt(1000, 1);
  options.max_new_tokens = 25;
  REQUIRE_ERROR_MENTIONS(generate(*model, long_prompt, options), "1025", "max_position_embeddings (1024)",
                         "--max-new-tokens");
  options.max_new_tokens = 0;
  REQUIRE_ERROR_MENTIONS(generate(*model, kPrompt, options), "--max-new-tokens");
}

TEST_CASE("forward refuses a batch that does not fit its cache", "[generate][bad-input]") {
  auto model = synthetic_model("tiny", 0, false);
  HostKVCache cache(model->config(), 2, 4);
  Batch batch;
  batch.add({0}, 0, kPrompt);
  REQUIRE_ERROR_MENTIONS(model->forward(batch, cache), "holds 4 tokens", "needs 7");
  Batch other_block;
  other_block.add({0, 2}, 0, kPrompt);
  REQUIRE_ERROR_MENTIONS(model->forward(other_block, cache), "block 2 out of range [0, 2)");
}
