// SPDX-License-Identifier: MIT
// The serving engine with a real (tiny, synthetic) model. The invariants of
// lab 04: a request yields the same tokens alone, in a static batch,
// continuously batched with others arriving later, and preempted then
// recomputed (deterministic reductions make a row's logits independent of
// its batch); every KV block is back in the pool when all requests finish or
// are aborted. Then the refusals at add_request and at construction, and
// RequestMetrics' arithmetic on hand-made timestamps.
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "serve/engine.h"
#include "serve/generate.h"
#include "serve/metrics.h"
#include "test_util.h"

using namespace servelab;

namespace {

using Ids = std::vector<std::int32_t>;

/// The tiny preset (2 layers, vocab 512, context 1024) with batch-invariant reductions.
std::unique_ptr<Model> tiny_model() {
  ModelOptions options;
  options.deterministic = true;
  options.num_threads = 2;
  return Model::from_preset("tiny", 7, options);
}

/// Prompts of assorted lengths (some cross 4-token block edges, one spans several blocks).
const std::vector<Ids> kPrompts = {
    {5, 77, 301, 12, 9, 460, 33},
    {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
    {400, 17, 250},
    {9, 9, 8, 8, 7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0},
};
constexpr int kMaxTokens = 8;

/// Greedy, or seeded sampling at temperature 0.8 with a seed per request.
SamplingParams sampling_for(bool seeded, std::size_t i) {
  SamplingParams p;
  if (seeded) {
    p.temperature = 0.8f;
    p.seed = 1000 + i;
  }
  return p;
}

/// Each prompt alone through generate() (one request, one contiguous block).
std::vector<Ids> generate_alone(Model& model, bool seeded) {
  std::vector<Ids> out;
  for (std::size_t i = 0; i < kPrompts.size(); ++i) {
    GenerateOptions options;
    options.max_new_tokens = kMaxTokens;
    options.sampling = sampling_for(seeded, i);
    out.push_back(generate(model, kPrompts[i], options).output_ids);
  }
  return out;
}

/// Held blocks of every request plus the free ones must be the whole pool; finished requests hold none.
void check_block_accounting(const Engine& engine) {
  const KVCacheManager& kv = engine.kv_cache_manager();
  int held = 0;
  for (const Request* r : engine.requests()) {
    const int n = kv.block_table(r->request_id).num_blocks();
    if (r->is_finished()) CHECK(n == 0);
    held += n;
  }
  CHECK(held + kv.block_pool().num_free_blocks() == engine.num_blocks());
}

/// A run of the engine: request i is added before step arrival_step[i]; returns each request's tokens.
struct Run {
  std::vector<Ids> outputs;
  int num_preemptions = 0;
  int preempted_after_output = 0;  // preemptions of a request that had emitted tokens (its resumption recomputes them)
  int max_running = 0;
  std::vector<std::string> log;
};

Run run_engine(Model& model, EngineConfig config, bool seeded, const std::vector<int>& arrival_step) {
  Run run;
  config.log = [&run](const std::string& line) { run.log.push_back(line); };
  Engine engine(model, config);
  std::map<int, std::size_t> index_of;  // request id -> prompt index
  std::size_t added = 0;
  for (int step = 0; added < kPrompts.size() || engine.has_unfinished_requests(); ++step) {
    REQUIRE(step < 1000);  // the engine must make progress
    for (std::size_t i = 0; i < kPrompts.size(); ++i)
      if (arrival_step[i] == step) {
        index_of[engine.add_request(kPrompts[i], sampling_for(seeded, i), kMaxTokens)] = i;
        ++added;
      }
    std::map<int, int> preemptions_before;
    for (const Request* r : engine.requests()) preemptions_before[r->request_id] = r->num_preemptions;
    engine.step();
    for (const Request* r : engine.requests())
      if (r->num_preemptions > preemptions_before[r->request_id] && r->num_output_tokens() > 0)
        ++run.preempted_after_output;
    check_block_accounting(engine);
    run.num_preemptions += engine.last_step().num_preempted;
    run.max_running = std::max(run.max_running, engine.last_step().num_scheduled_requests);
  }
  run.outputs.resize(kPrompts.size());
  for (const Request* r : engine.requests()) {
    CHECK(r->finish_reason == FinishReason::LENGTH);
    run.outputs[index_of.at(r->request_id)] = Ids(r->output_token_ids().begin(), r->output_token_ids().end());
    // Timestamps are in order: arrival, first scheduled, every token.
    CHECK(r->times.first_scheduled >= r->times.arrival);
    REQUIRE(r->times.token_times.size() == kMaxTokens);
    CHECK(r->times.token_times.front() >= r->times.first_scheduled);
    CHECK(std::is_sorted(r->times.token_times.begin(), r->times.token_times.end()));
  }
  // Every block is back in the pool.
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() == engine.num_blocks());
  CHECK(engine.kv_cache_manager().num_requests_holding_blocks() == 0);
  CHECK(engine.scheduler().num_preemptions() == run.num_preemptions);
  return run;
}

EngineConfig config_for(SchedulingPolicy policy, int max_num_seqs) {
  EngineConfig c;
  c.scheduler = {.policy = policy, .max_num_seqs = max_num_seqs, .max_num_batched_tokens = 256};
  c.block_size = 4;
  return c;
}

}  // namespace

TEST_CASE("a request yields the same tokens alone and batched statically and batched continuously and preempted",
          "[engine][identity][deterministic]") {
  auto model = tiny_model();
  for (bool seeded : {false, true}) {
    DYNAMIC_SECTION((seeded ? "seeded sampling at temperature 0.8" : "greedy")) {
      const std::vector<Ids> alone = generate_alone(*model, seeded);
      for (const Ids& o : alone) REQUIRE(o.size() == kMaxTokens);
      // The four prompts must not all give the same tokens, or identity would prove little.
      CHECK(alone[0] != alone[1]);

      // (a) one at a time through the engine, paged in blocks of 4 instead of generate()'s one block.
      const Run one = run_engine(*model, config_for(SchedulingPolicy::ONE_AT_A_TIME, 4), seeded, {0, 0, 0, 0});
      CHECK(one.max_running == 1);
      CHECK(one.outputs == alone);

      // (b) a static batch of all four.
      const Run stat = run_engine(*model, config_for(SchedulingPolicy::STATIC, 4), seeded, {0, 0, 0, 0});
      CHECK(stat.max_running == 4);
      CHECK(stat.outputs == alone);

      // (c) continuous batching, two at first and the others arriving while those decode.
      const Run cont = run_engine(*model, config_for(SchedulingPolicy::CONTINUOUS, 3), seeded, {0, 0, 2, 5});
      CHECK(cont.max_running == 3);
      CHECK(cont.outputs == alone);
      CHECK(cont.num_preemptions == 0);

      // (d) a KV cache of 8 blocks of 4 tokens: the four cannot all grow, so some are preempted and recomputed.
      EngineConfig small = config_for(SchedulingPolicy::CONTINUOUS, 4);
      small.kv_cache_memory = 8 * kv_cache_bytes_for(model->config(), 1, small.block_size);
      const Run pre = run_engine(*model, small, seeded, {0, 0, 0, 0});
      CHECK(pre.num_preemptions >= 1);
      CHECK(pre.preempted_after_output >= 1);
      REQUIRE(pre.log.size() == static_cast<std::size_t>(pre.num_preemptions));
      CHECK_THAT(pre.log[0], Catch::Contains("preempted request") && Catch::Contains("computed tokens thrown away"));
      CHECK(pre.outputs == alone);
    }
  }
}

TEST_CASE("the engine sizes its KV cache from the memory budget", "[engine]") {
  auto model = tiny_model();
  EngineConfig c = config_for(SchedulingPolicy::CONTINUOUS, 4);
  const std::size_t block_bytes = kv_cache_bytes_for(model->config(), 1, c.block_size);
  c.kv_cache_memory = 10 * block_bytes + block_bytes / 2;  // a partial block is not a block
  Engine engine(*model, c);
  CHECK(engine.num_blocks() == 10);
  CHECK(engine.kv_cache().num_blocks() == 10);
  CHECK(engine.kv_cache().block_size() == 4);
  CHECK(engine.kv_cache_manager().block_pool().num_blocks() == 10);
  // With no budget: room for max_num_seqs sequences of max_model_len.
  c.kv_cache_memory = 0;
  c.max_model_len = 64;
  Engine sized(*model, c);
  CHECK(sized.num_blocks() == 4 * 64 / 4);
}

TEST_CASE("aborting waiting and running requests returns every block", "[engine][abort]") {
  auto model = tiny_model();
  Engine engine(*model, config_for(SchedulingPolicy::CONTINUOUS, 2));
  const int a = engine.add_request(kPrompts[0], {}, 50);
  const int b = engine.add_request(kPrompts[1], {}, 50);
  const int c = engine.add_request(kPrompts[2], {}, 50);  // waits: max_num_seqs 2
  engine.step();
  engine.step();
  CHECK(engine.scheduler().running().size() == 2);
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() < engine.num_blocks());
  CHECK(engine.abort_request(c));  // from waiting
  CHECK(engine.request(c).finish_reason == FinishReason::ABORT);
  CHECK(engine.request(c).num_output_tokens() == 0);
  CHECK(engine.abort_request(a));  // from running
  check_block_accounting(engine);
  CHECK(engine.kv_cache_manager().block_table(a).num_blocks() == 0);
  engine.step();  // b runs on alone
  CHECK(engine.last_step().num_scheduled_requests == 1);
  CHECK(engine.abort_request(b));
  CHECK_FALSE(engine.has_unfinished_requests());
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() == engine.num_blocks());
  CHECK_FALSE(engine.abort_request(b));   // already finished
  CHECK_FALSE(engine.abort_request(99));  // unknown
  CHECK(engine.step().empty());
  CHECK(engine.request(a).num_output_tokens() == 2);  // what it emitted before the abort is kept
}

TEST_CASE("add_request refuses bad requests by name and queues nothing", "[engine][bad-input]") {
  auto model = tiny_model();  // vocab 512, max_position_embeddings 1024
  EngineConfig c = config_for(SchedulingPolicy::CONTINUOUS, 4);
  c.max_model_len = 64;
  c.scheduler.max_num_batched_tokens = 32;
  c.kv_cache_memory = 10 * kv_cache_bytes_for(model->config(), 1, c.block_size);  // 40 tokens of KV
  Engine engine(*model, c);
  const Ids ok = {1, 2, 3};
  REQUIRE_ERROR_MENTIONS(engine.add_request(Ids{}, {}, 4), "prompt is empty");
  REQUIRE_ERROR_MENTIONS(engine.add_request(Ids{1, 512}, {}, 4), "512", "outside the vocabulary [0, 512)");
  REQUIRE_ERROR_MENTIONS(engine.add_request(Ids{-1}, {}, 4), "-1", "vocabulary");
  REQUIRE_ERROR_MENTIONS(engine.add_request(ok, {}, 0), "--max-new-tokens", "got 0");
  REQUIRE_ERROR_MENTIONS(engine.add_request(ok, {}, -5), "--max-new-tokens");
  REQUIRE_ERROR_MENTIONS(engine.add_request(ok, {}, 62), "65", "--max-model-len (64)");
  REQUIRE_ERROR_MENTIONS(engine.add_request(Ids(33, 1), {}, 1), "33 tokens", "--max-num-batched-tokens 32");
  // 30 + 20 = 50 tokens fit max_model_len but need 13 blocks of the cache's 10.
  REQUIRE_ERROR_MENTIONS(engine.add_request(Ids(30, 1), {}, 20), "needs 13 KV blocks", "has 10", "--kv-cache-memory");
  SamplingParams bad_sampling;
  bad_sampling.temperature = -1.0f;
  REQUIRE_ERROR_MENTIONS(engine.add_request(ok, bad_sampling, 4), "--temperature");
  // Nothing was queued.
  CHECK(engine.requests().empty());
  CHECK_FALSE(engine.has_unfinished_requests());
  CHECK(engine.step().empty());
  // The largest request that fits is taken: 32 + 8 = 40 tokens, exactly the 10 blocks.
  engine.add_request(Ids(32, 1), {}, 8);
  CHECK(engine.requests().size() == 1);
  while (engine.has_unfinished_requests()) engine.step();
  CHECK(engine.requests().front()->num_output_tokens() == 8);
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() == 10);
}

TEST_CASE("the engine refuses non-positive sizes by name", "[engine][bad-input]") {
  auto model = tiny_model();
  const auto with = [&](auto change) {
    EngineConfig c = config_for(SchedulingPolicy::CONTINUOUS, 4);
    change(c);
    return c;
  };
  REQUIRE_ERROR_MENTIONS(Engine(*model, with([](EngineConfig& c) { c.block_size = 0; })), "--block-size", "got 0");
  REQUIRE_ERROR_MENTIONS(Engine(*model, with([](EngineConfig& c) { c.block_size = -16; })), "--block-size");
  REQUIRE_ERROR_MENTIONS(Engine(*model, with([](EngineConfig& c) { c.scheduler.max_num_seqs = 0; })), "--max-num-seqs",
                         "got 0");
  REQUIRE_ERROR_MENTIONS(Engine(*model, with([](EngineConfig& c) { c.scheduler.max_num_seqs = -2; })),
                         "--max-num-seqs");
  REQUIRE_ERROR_MENTIONS(Engine(*model, with([](EngineConfig& c) { c.scheduler.max_num_batched_tokens = 0; })),
                         "--max-num-batched-tokens", "got 0");
  const std::size_t block_bytes = kv_cache_bytes_for(model->config(), 1, 4);
  REQUIRE_ERROR_MENTIONS(Engine(*model, with([&](EngineConfig& c) { c.kv_cache_memory = block_bytes - 1; })),
                         "--kv-cache-memory", "holds no KV block", std::to_string(block_bytes));
  REQUIRE_ERROR_MENTIONS(Engine(*model, with([](EngineConfig& c) { c.max_model_len = -1; })), "--max-model-len");
  REQUIRE_ERROR_MENTIONS(Engine(*model, with([](EngineConfig& c) { c.max_model_len = 1025; })), "--max-model-len",
                         "1024");
  // Exactly one block is enough to build an engine.
  Engine one(*model, with([&](EngineConfig& c) { c.kv_cache_memory = block_bytes; }));
  CHECK(one.num_blocks() == 1);
}

TEST_CASE("request metrics from hand-made timestamps: queue TTFT TPOT ITL E2E", "[engine][metrics]") {
  // Binary fractions, so every difference is exact.
  RequestTimes t;
  t.arrival = 1.0;
  t.first_scheduled = 1.5;
  t.token_times = {2.0, 2.25, 2.75, 3.5};
  t.finished = 3.5;
  const RequestMetrics m = RequestMetrics::from(t);
  CHECK(m.output_tokens == 4);
  CHECK(m.queue_time == 0.5);  // 1.5 - 1.0
  CHECK(m.ttft == 1.0);        // 2.0 - 1.0
  CHECK(m.e2e == 2.5);         // 3.5 - 1.0
  CHECK(m.itl == std::vector<double>{0.25, 0.5, 0.75});
  CHECK(m.tpot == 0.5);  // (2.5 - 1.0) / (4 - 1), the mean ITL

  RequestTimes single;
  single.arrival = 0.0;
  single.first_scheduled = 0.25;
  single.token_times = {0.75};
  const RequestMetrics s = RequestMetrics::from(single);
  CHECK(s.ttft == 0.75);
  CHECK(s.e2e == 0.75);
  CHECK(s.tpot == 0.0);  // no second token
  CHECK(s.itl.empty());

  RequestTimes none;
  none.first_scheduled = 0.0;
  REQUIRE_ERROR_MENTIONS(RequestMetrics::from(none), "no token");
  RequestTimes unscheduled;
  unscheduled.token_times = {1.0};
  REQUIRE_ERROR_MENTIONS(RequestMetrics::from(unscheduled), "never scheduled");
}

TEST_CASE("serving metrics summarise finished requests over the run's span", "[engine][metrics]") {
  const Ids prompt = {1, 2};
  Request a(0, prompt, {}, 4, {}, 0.0), b(1, prompt, {}, 4, {}, 1.0), idle(2, prompt, {}, 4, {}, 0.5);
  a.times.first_scheduled = 0.0;
  a.append_output_token(7, 0.5);
  a.append_output_token(7, 1.0);
  b.times.first_scheduled = 1.0;
  b.append_output_token(7, 2.0);
  const ServingMetrics s = summarize_requests({&a, &b, &idle});  // idle emitted nothing: skipped
  CHECK(s.num_requests == 2);
  CHECK(s.output_tokens == 3);
  CHECK(s.duration == 2.0);  // first arrival 0.0 to last token 2.0
  CHECK(s.output_tokens_per_second == 1.5);
  CHECK(s.ttft.count == 2);
  CHECK(s.ttft.max == 1.0);  // b: 2.0 - 1.0
  CHECK(s.tpot.count == 1);  // only a has two tokens
  CHECK(s.tpot.mean == 0.5);
  REQUIRE_ERROR_MENTIONS(summarize_requests({&idle}), "no request emitted a token");
}
