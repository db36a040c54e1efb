// SPDX-License-Identifier: MIT
// Faults under load, at the engine's API: a seeded storm of good and bad
// requests, random aborts and a KV cache too small for the load. Every bad
// request is refused without touching the engine, every accepted one ends
// (finished or aborted), the pool gets every block back, and each request
// that was not aborted produces the tokens it produces alone, preemptions
// and recomputation included.
#include <map>
#include <random>

#include "core/error.h"
#include "core/random.h"
#include "serve/engine.h"
#include "serve/generate.h"
#include "test_util.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;

TEST_CASE("a storm of requests aborts and refusals leaves no block behind and no token changed", "[engine][faults]") {
  ModelOptions options;
  options.deterministic = true;  // batch-invariant: alone and batched must agree exactly
  auto model = Model::from_preset("tiny", 3, options);
  const ModelConfig& c = model->config();
  EngineConfig config;
  config.scheduler = {SchedulingPolicy::CONTINUOUS, 6, 256};
  config.block_size = 4;
  config.kv_cache_memory = kv_cache_bytes_for(c, 24, 4);  // 96 tokens for up to 6 requests of up to 60: preemptions
  std::vector<std::string> log;
  config.log = [&](const std::string& line) { log.push_back(line); };
  Engine engine(*model, config);

  SplitMix64 rng(2024);
  std::map<int, std::vector<std::int32_t>> prompts;  // accepted request -> prompt
  std::map<int, int> max_tokens;
  std::vector<int> aborted;
  int refused = 0;
  for (int round = 0; round < 120; ++round) {
    const int action = rng.uniform_int(0, 9);
    if (action <= 3) {  // a good request
      const auto prompt = synthetic_prompt(rng.uniform_int(1, 30), c.vocab_size, rng.next_u64());
      const int n = rng.uniform_int(1, 30);
      const int id = engine.add_request(prompt, SamplingParams{}, n);
      prompts[id] = prompt;
      max_tokens[id] = n;
    } else if (action == 4) {  // a bad one: refused, nothing queued
      const int waiting = static_cast<int>(engine.scheduler().waiting().size());
      const int kind = rng.uniform_int(0, 3);
      const std::vector<std::int32_t> outside = {1, c.vocab_size};
      const auto too_long =
          synthetic_prompt(100, c.vocab_size, 1);  // 104 tokens with its output: more than the 96 of the cache
      if (kind == 0) REQUIRE_ERROR_MENTIONS(engine.add_request({}, SamplingParams{}, 4), "prompt is empty");
      if (kind == 1) REQUIRE_ERROR_MENTIONS(engine.add_request(outside, SamplingParams{}, 4), "outside the vocabulary");
      if (kind == 2) REQUIRE_ERROR_MENTIONS(engine.add_request(too_long, SamplingParams{}, 4), "KV blocks");
      if (kind == 3) REQUIRE_ERROR_MENTIONS(engine.add_request(outside, SamplingParams{}, 0), "--max-new-tokens");
      CHECK(static_cast<int>(engine.scheduler().waiting().size()) == waiting);
      ++refused;
    } else if (action == 5 && !prompts.empty()) {  // abort someone, waiting, running or already finished
      auto it = prompts.begin();
      std::advance(it, rng.uniform_int(0, static_cast<int>(prompts.size()) - 1));
      if (engine.abort_request(it->first)) aborted.push_back(it->first);
      CHECK_FALSE(engine.abort_request(it->first));  // a second abort finds it finished
    } else {
      engine.step();
    }
  }
  while (engine.has_unfinished_requests()) engine.step();

  const BlockPool& pool = engine.kv_cache_manager().block_pool();
  CHECK(pool.num_free_blocks() == pool.num_blocks());
  CHECK(engine.kv_cache_manager().num_requests_holding_blocks() == 0);
  CHECK(engine.scheduler().num_preemptions() > 0);  // the load really did not fit
  CHECK(log.size() == static_cast<std::size_t>(engine.scheduler().num_preemptions()));
  CHECK(refused > 0);
  CHECK_FALSE(aborted.empty());
  int compared = 0;
  for (const auto& [id, prompt] : prompts) {
    const Request& r = engine.request(id);
    REQUIRE(r.is_finished());
    if (r.finish_reason == FinishReason::ABORT) continue;
    CHECK(r.finish_reason == FinishReason::LENGTH);
    GenerateOptions alone;
    alone.max_new_tokens = max_tokens[id];
    const auto expected = generate(*model, prompt, alone).output_ids;
    const std::vector<std::int32_t> got(r.output_token_ids().begin(), r.output_token_ids().end());
    INFO("request " << id << " preempted " << r.num_preemptions << " times");
    CHECK(got == expected);
    ++compared;
  }
  CHECK(compared > 10);
}
