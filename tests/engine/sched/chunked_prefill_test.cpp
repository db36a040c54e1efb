// SPDX-License-Identifier: MIT
// Chunked prefill (lab 06): a prompt split over steps within the token
// budget, decodes first; the chunks meet again in the KV cache exactly as a
// one-shot prefill, so the tokens do not change.
#include <cstring>

#include "core/error.h"
#include "core/random.h"
#include "model/model.h"
#include "sched/scheduler.h"
#include "scheduler_sim.h"
#include "serve/engine.h"
#include "serve/generate.h"
#include "test_util.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;
using test::Sim;

namespace {

SchedulerConfig chunked(int budget, int threshold, int max_num_seqs = 16) {
  return {.policy = SchedulingPolicy::CONTINUOUS,
          .max_num_seqs = max_num_seqs,
          .max_num_batched_tokens = budget,
          .enable_chunked_prefill = true,
          .long_prefill_token_threshold = threshold};
}

}  // namespace

TEST_CASE("the KV cache article's 1000-token prompt with budget 512 and 256-token chunks is prefilled 256 256 256 232",
          "[chunked]") {
  Sim sim(chunked(512, 256), 128, 16);
  sim.add(1000, 2);  // A
  CHECK(sim.step() == "A:256");
  CHECK(sim.step() == "A:256");
  CHECK(sim.step() == "A:256");
  CHECK(sim.step() == "A:232");  // the last chunk catches up: A samples its first token here
  CHECK(sim.requests[0].num_output_tokens() == 1);
  CHECK(sim.step() == "A:1");
  CHECK(sim.all_blocks_free());
}

TEST_CASE("decodes go first and prompt chunks fill what is left of the budget", "[chunked]") {
  Sim sim(chunked(8, 0), 64, 4);
  sim.add(2, 10);  // A: decodes for a while
  sim.add(3, 10);  // B
  CHECK(sim.step() == "A:2 B:3");
  sim.add(20, 1);                      // C: a long prompt arrives while A and B decode
  CHECK(sim.step() == "A:1 B:1 C:6");  // 8 - 2 decodes = 6 prompt tokens
  CHECK(sim.step() == "A:1 B:1 C:6");
  CHECK(sim.step() == "A:1 B:1 C:6");
  CHECK(sim.step() == "A:1 B:1 C:2");  // C catches up (6 + 6 + 6 + 2 = 20) and samples
  CHECK(sim.requests[2].is_finished());
}

TEST_CASE("without chunking a long prompt takes a whole step and the decodes wait in it", "[chunked]") {
  Sim sim(SchedulingPolicy::CONTINUOUS, 16, 64, 64, 4);
  sim.add(2, 10);
  sim.add(3, 10);
  CHECK(sim.step() == "A:2 B:3");
  sim.add(20, 1);
  CHECK(sim.step() == "A:1 B:1 C:20");  // one step carries the whole prompt beside the decodes
}

TEST_CASE("no step exceeds the token budget with chunked prefill", "[chunked]") {
  Sim sim(chunked(48, 32, 8), 400, 4);
  SplitMix64 rng(7);
  for (int i = 0; i < 30; ++i) sim.add(rng.uniform_int(1, 120), rng.uniform_int(1, 20));
  int steps = 0;
  while (sim.scheduler.has_unfinished_requests()) {
    sim.step();
    REQUIRE(sim.last.total_num_scheduled_tokens <= 48);
    for (const ScheduledRequest& s : sim.last.scheduled) CHECK(s.num_new_tokens <= 32);
    REQUIRE(++steps < 10000);
  }
  CHECK(sim.all_blocks_free());
}

TEST_CASE("chunks meet again in the KV cache: chunked prefill writes the bytes of a one-shot prefill", "[chunked]") {
  ModelOptions options;
  options.deterministic = true;  // the guarantee holds bit for bit only with batch-invariant reductions
  auto model = Model::from_preset("tiny", 5, options);
  const auto prompt = synthetic_prompt(100, model->config().vocab_size, 9);
  auto one_shot = model->make_kv_cache(8, 16), chunks = model->make_kv_cache(8, 16);
  const std::vector<std::int32_t> table = {6, 1, 3, 0, 7, 2, 5};  // 112 tokens of room, blocks shuffled
  Batch whole;
  whole.add(table, 0, prompt);
  const auto last_logits = model->forward(whole, *one_shot);
  std::vector<float> chunk_logits;
  for (int at = 0; at < 100; at += 37) {  // 37 + 37 + 26, not aligned to the 16-token blocks
    const int n = std::min(37, 100 - at);
    Batch part;
    part.add(table, at, std::span(prompt).subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(n)));
    chunk_logits = model->forward(part, *chunks);
  }
  CHECK(chunk_logits == last_logits);  // the last chunk's last row is the prompt's last row
  std::vector<std::byte> a(table.size() * one_shot->bytes_per_block()), b(a.size());
  one_shot->export_blocks(table, a);
  chunks->export_blocks(table, b);
  CHECK(std::memcmp(a.data(), b.data(), a.size()) == 0);
}

TEST_CASE("the engine gives every request the same tokens with and without chunked prefill", "[chunked]") {
  ModelOptions options;
  options.deterministic = true;
  auto model = Model::from_preset("tiny", 5, options);
  const int vocab = model->config().vocab_size;
  std::vector<std::vector<std::int32_t>> outputs[2];
  for (int chunking = 0; chunking < 2; ++chunking) {
    EngineConfig config;
    config.scheduler =
        chunking ? chunked(40, 24, 4) : SchedulerConfig{.max_num_seqs = 4, .max_num_batched_tokens = 256};
    config.block_size = 8;
    config.kv_cache_memory = kv_cache_bytes_for(model->config(), 64, 8);
    Engine engine(*model, config);
    for (int i = 0; i < 6; ++i) engine.add_request(synthetic_prompt(20 + 30 * i, vocab, i), SamplingParams{}, 12);
    int steps = 0;
    while (engine.has_unfinished_requests()) {
      engine.step();
      if (chunking) REQUIRE(engine.last_step().num_scheduled_tokens <= 40);
      REQUIRE(++steps < 5000);
    }
    for (const Request* r : engine.requests())
      outputs[chunking].emplace_back(r->output_token_ids().begin(), r->output_token_ids().end());
  }
  CHECK(outputs[0] == outputs[1]);
  GenerateOptions alone;
  alone.max_new_tokens = 12;
  CHECK(outputs[1][5] == generate(*model, synthetic_prompt(170, vocab, 5), alone).output_ids);
}

TEST_CASE("chunked prefill lets a prompt longer than the budget in and refuses a negative threshold", "[chunked]") {
  auto model = Model::from_preset("tiny", 5, ModelOptions{});
  EngineConfig config;
  config.scheduler = {.max_num_seqs = 4, .max_num_batched_tokens = 16};
  Engine whole(*model, config);
  const auto prompt = synthetic_prompt(40, model->config().vocab_size, 1);
  REQUIRE_ERROR_MENTIONS(whole.add_request(prompt, SamplingParams{}, 4), "--max-num-batched-tokens 16",
                         "--enable-chunked-prefill");
  config.scheduler.enable_chunked_prefill = true;
  Engine split(*model, config);
  split.add_request(prompt, SamplingParams{}, 4);
  while (split.has_unfinished_requests()) split.step();
  CHECK(split.request(0).num_output_tokens() == 4);
  config.scheduler.long_prefill_token_threshold = -1;
  REQUIRE_ERROR_MENTIONS(Engine(*model, config), "--long-prefill-token-threshold");
}
