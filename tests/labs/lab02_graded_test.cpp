// SPDX-License-Identifier: MIT
// Graded tests of what a lab 02 student writes (the LAB02 regions: where the
// new tokens sit, the KV write, the cache's view, what a cached step feeds,
// the KV-bytes and attention-FLOP formulas). Each one fails
// on the wrong implementations in tests/labs/mutants/lab02/.
#include "kv/kv_cache.h"
#include "model/model.h"
#include "perf/work.h"
#include "serve/generate.h"
#include "graded.h"
#include "test_util.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;

namespace {

// Row @p r of a [rows, vocab] logits array.
std::vector<float> row_of(const std::vector<float>& logits, std::size_t r, std::size_t vocab) {
  return {logits.begin() + static_cast<long>(r * vocab), logits.begin() + static_cast<long>((r + 1) * vocab)};
}

void check_close(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  CHECK(worst < 1e-3);
}

}  // namespace

TEST_CASE("a decode step over the cache gives the logits the whole prompt gives: two sequences in other blocks",
          "[lab02][graded]") {
  auto model = test::deterministic_tiny();
  const auto V = static_cast<std::size_t>(model->config().vocab_size);
  const auto a = synthetic_prompt(10, model->config().vocab_size, 1),
             b = synthetic_prompt(7, model->config().vocab_size, 2);
  // Reference: each whole sequence in one step, every row's logits.
  HostKVCache full(model->config(), 3, 16);
  Batch whole;
  whole.add({2}, 0, a, LogitsFor::All);
  whole.add({0}, 0, b, LogitsFor::All);
  const std::vector<float> reference = model->forward(whole, full);
  // Cached: a 6-token and a 4-token prefill in one ragged step (a in block 1, b in block 2), then one
  // token of each per step, each attending over what the cache holds.
  HostKVCache cache(model->config(), 3, 16);
  Batch prefill;
  prefill.add({1}, 0, std::span(a).first(6));
  prefill.add({2}, 0, std::span(b).first(4));
  const std::vector<float> first = model->forward(prefill, cache);
  check_close(row_of(first, 0, V), row_of(reference, 5, V));
  check_close(row_of(first, 1, V), row_of(reference, 10 + 3, V));
  for (int t = 6; t < 10; ++t) {
    Batch step;
    step.add({1}, t, std::span(a).subspan(static_cast<std::size_t>(t), 1));
    if (t - 2 < 7) step.add({2}, t - 2, std::span(b).subspan(static_cast<std::size_t>(t - 2), 1));
    const std::vector<float> logits = model->forward(step, cache);
    check_close(row_of(logits, 0, V), row_of(reference, static_cast<std::size_t>(t), V));
    if (t - 2 < 7) check_close(row_of(logits, 1, V), row_of(reference, static_cast<std::size_t>(10 + t - 2), V));
  }
  // Three new tokens at once after cached ones (a chunk): each attends to the cache and to those before it.
  HostKVCache again(model->config(), 1, 16);
  Batch head, tail;
  head.add({0}, 0, std::span(a).first(7));
  model->forward(head, again);
  tail.add({0}, 7, std::span(a).subspan(7, 3), LogitsFor::All);
  const std::vector<float> three = model->forward(tail, again);
  for (std::size_t r = 0; r < 3; ++r) check_close(row_of(three, r, V), row_of(reference, 7 + r, V));
}

TEST_CASE("the cache's view: one block is contiguous at that block, a longer table reads through it",
          "[lab02][graded]") {
  const ModelConfig c = preset("tiny");
  HostKVCache cache(c, 4, 8);
  const std::vector<std::int32_t> one = {3}, paged = {2, 0};
  for (int layer : {0, 1}) {
    const KVView v = cache.view(layer, one);
    CHECK(v.block_table == nullptr);
    CHECK(v.row_stride == cache.kv_dim());
    CHECK(v.k == cache.key_blocks(layer) + 3 * 8 * cache.kv_dim());
    CHECK(v.v == cache.value_blocks(layer) + 3 * 8 * cache.kv_dim());
    const KVView p = cache.view(layer, paged);
    CHECK(p.block_table == paged.data());
    CHECK(p.block_size == 8);
    CHECK(p.k == cache.key_blocks(layer));
    CHECK(p.v == cache.value_blocks(layer));
    CHECK(p.row_stride == cache.kv_dim());
  }
}

TEST_CASE("generate_loop with the cache feeds the prompt once, then only the newest token, and keeps the tokens",
          "[lab02][graded]") {
  auto model = test::deterministic_tiny();
  const auto prompt = synthetic_prompt(8, model->config().vocab_size, 4);
  test::at_greedy_and_sampled(10, 3, [&](GenerateOptions gen) {
    HostKVCache cache(model->config(), 1, 8 + 10);
    gen.use_kv_cache = false;
    const GenerateResult recomputed = generate_loop(*model, cache, prompt, gen);
    gen.use_kv_cache = true;
    const GenerateResult cached = generate_loop(*model, cache, prompt, gen);
    CHECK(cached.output_ids == recomputed.output_ids);
    std::vector<int> fed(10, 1);
    fed[0] = 8;
    CHECK(cached.step_tokens == fed);
  });
}

TEST_CASE("the KV-bytes and attention-FLOP formulas by hand: GQA, bf16, a decode after a cached prefix",
          "[lab02][graded]") {
  ModelConfig c = preset("tiny");  // 2 layers, 4 query heads, 2 KV heads, head_dim 16
  REQUIRE(c.num_hidden_layers == 2);
  const std::uint64_t per_token = 2ull * 2 * c.num_key_value_heads * c.head_dim;  // K and V, 2 layers
  CHECK(kv_cache_bytes(c, 1, 1, DType::F32) == per_token * 4);
  CHECK(kv_cache_bytes(c, 100, 3, DType::BF16) == per_token * 2 * 300);
  CHECK(kv_cache_bytes(c, 0, 3, DType::F32) == 0);
  c.num_key_value_heads = 1;  // MQA: half of GQA's KV
  CHECK(kv_cache_bytes(c, 10, 1, DType::F32) == per_token / 2 * 4 * 10);
  c = preset("tiny");
  const double q = c.q_dim();
  // 1 query after 9 cached reads 10 keys; 3 from scratch read 1 + 2 + 3; 2 after 4 read 5 + 6.
  CHECK(attention_flops(c, 9, 1) == 2 * 2 * 10 * q * 2);
  CHECK(attention_flops(c, 0, 3) == 2 * 2 * 6 * q * 2);
  CHECK(attention_flops(c, 4, 2) == 2 * 2 * 11 * q * 2);
}
