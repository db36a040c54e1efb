// SPDX-License-Identifier: MIT
// Graded tests of what a lab 04 student writes (the LAB04 regions), beyond
// the engine tests lab 04 also runs (block pool, KV manager, scheduler,
// engine, paged attention): the block-table lookup by hand, and the
// continuous policy's admission and preemption step by step. Each one fails
// on the wrong implementations in tests/labs/mutants/lab04/.
#include "graded.h"
#include "kv/kv_view.h"
#include "sched/scheduler.h"
#include "serve/engine.h"
#include "test_util.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;

TEST_CASE("KVView::row reads a paged sequence's token through its block table", "[lab04][graded]") {
  const std::int32_t table[] = {7, 2, 5};
  const KVView paged{nullptr, nullptr, 1, table, 4};
  // block_size 4: tokens 0-3 in block 7, 4-7 in block 2, 8-9 in block 5.
  const std::size_t expected[] = {28, 29, 30, 31, 8, 9, 10, 11, 20, 21};
  for (int t = 0; t < 10; ++t) CHECK(paged.row(t) == expected[t]);
  const KVView contiguous{nullptr, nullptr, 1, nullptr, 0};
  CHECK(contiguous.row(13) == 13);
}

TEST_CASE("continuous batching step by step: admission in order, the newest preempted, recomputed first",
          "[lab04][graded]") {
  // Blocks of 4 tokens, a pool of 5. A (6 prompt tokens, 5 to generate) and B (5 prompt tokens) take 2
  // blocks each; C (4) waits for a seat (max_num_seqs 2).
  KVCacheManager kv(5, 4);
  Scheduler s({SchedulingPolicy::CONTINUOUS, 2, 64}, kv);
  Request a(0, std::vector<std::int32_t>(6, 1), {}, 5, {}, 0), b(1, std::vector<std::int32_t>(5, 1), {}, 10, {}, 0),
      c(2, std::vector<std::int32_t>(4, 1), {}, 10, {}, 0);
  for (Request* r : {&a, &b, &c}) s.add_request(r);
  SchedulerOutput out = s.schedule();
  REQUIRE(out.scheduled.size() == 2);
  CHECK(out.scheduled[0].request == &a);
  CHECK(out.scheduled[0].num_new_tokens == 6);
  CHECK(out.scheduled[1].request == &b);
  CHECK(kv.block_pool().num_free_blocks() == 1);
  CHECK(s.waiting().front() == &c);
  // Steps 2-4 decode both. A's 9th token (step 4) needs a 3rd block: the last free one.
  for (int step = 2; step <= 4; ++step) {
    s.update_from_output(out, {3, 3}, step);
    out = s.schedule();
    CHECK(out.preempted_request_ids.empty());
    CHECK(out.scheduled.size() == 2);
  }
  CHECK(kv.block_table(0).num_blocks() == 3);
  CHECK(kv.block_pool().num_free_blocks() == 0);
  s.update_from_output(out, {3, 3}, 5.0);
  // Step 5: B's 9th token needs a block and none is free: B, the newest, is preempted, and nobody joins.
  out = s.schedule();
  REQUIRE(out.preempted_request_ids == std::vector<int>{1});
  REQUIRE(out.scheduled.size() == 1);
  CHECK(out.scheduled[0].request == &a);
  CHECK(b.status == RequestStatus::PREEMPTED);
  CHECK(b.num_computed_tokens == 0);
  CHECK(b.num_preemptions == 1);
  CHECK(s.num_preemptions() == 1);
  CHECK(kv.block_table(1).num_blocks() == 0);
  CHECK(kv.block_pool().num_free_blocks() == 2);
  REQUIRE(s.waiting().size() == 2);
  CHECK(s.waiting().front() == &b);  // ahead of C, which arrived later
  CHECK(s.running().size() == 1);
  // A emits its 5th and last token and frees its 3 blocks; step 6 admits B first, recomputing its
  // 5 prompt and 4 output tokens, then C.
  CHECK(s.update_from_output(out, {3}, 6.0) == std::vector<Request*>{&a});
  CHECK(kv.block_pool().num_free_blocks() == 5);
  out = s.schedule();
  REQUIRE(out.scheduled.size() == 2);
  CHECK(out.scheduled[0].request == &b);
  CHECK(out.scheduled[0].num_new_tokens == 9);
  CHECK(out.scheduled[1].request == &c);
  CHECK(b.status == RequestStatus::RUNNING);
  CHECK(kv.block_pool().num_free_blocks() == 1);
}

TEST_CASE("the engine with a cache computes one token per decode, without it the whole sequence again",
          "[lab04][graded]") {
  auto model = test::deterministic_tiny();
  const auto prompt = synthetic_prompt(8, model->config().vocab_size, 4);
  std::vector<std::vector<std::int32_t>> outputs;
  for (const bool cache : {true, false}) {
    EngineConfig config;
    config.scheduler = {SchedulingPolicy::CONTINUOUS, 4, 256};
    config.enable_kv_cache = cache;
    Engine engine(*model, config);
    const int id = engine.add_request(prompt, SamplingParams{}, 6);
    std::vector<int> fed;
    while (engine.has_unfinished_requests()) {
      // Every step samples the request's next token (REQUIRE: a step that throws ends the loop).
      REQUIRE(engine.step().size() == 1);
      fed.push_back(engine.last_step().num_scheduled_tokens);
    }
    const Request& r = engine.request(id);
    for (std::size_t k = 0; k < fed.size(); ++k) CHECK(fed[k] == (cache && k > 0 ? 1 : 8 + static_cast<int>(k)));
    CHECK(r.num_computed_tokens == (cache ? 8 + 5 : 0));
    outputs.emplace_back(r.output_token_ids().begin(), r.output_token_ids().end());
    CHECK(outputs.back().size() == 6);
  }
  CHECK(outputs[0] == outputs[1]);
}

// Prefix caching (the LAB04 regions of kv/block_hash.cpp, kv/block_pool.cpp and sched/kv_cache_manager.cpp).
namespace {

/// A request of @p tokens with id @p id, for driving the KV manager by hand.
Request request_of(int id, std::vector<std::int32_t> tokens) { return Request(id, tokens, {}, 4, {}, 0); }

/// Admits @p r as the scheduler does: the cached prefix, then its uncomputed tokens; then marks them
/// computed and publishes its full blocks, as update_from_output does after the step.
KVCacheManager::ComputedBlocks admit_and_compute(KVCacheManager& kv, Request& r) {
  const KVCacheManager::ComputedBlocks hit = kv.get_computed_blocks(r);
  r.num_computed_tokens = hit.num_tokens;
  REQUIRE(kv.allocate_slots(r, r.num_uncomputed_tokens(), hit).has_value());
  r.num_computed_tokens = r.num_tokens();
  kv.cache_blocks(r);
  return hit;
}

std::vector<std::int32_t> free_ids(const KVCacheManager& kv) {
  const auto& q = kv.block_pool().free_block_queue();
  return {q.begin(), q.end()};
}

}  // namespace

TEST_CASE("prefix cache: a block's hash chains its parent's, so equal blocks after different prefixes differ",
          "[lab04][graded]") {
  const std::vector<std::int32_t> a{1, 2, 3, 4, 9, 9, 9, 9}, b{5, 6, 7, 8, 9, 9, 9, 9};
  const std::vector<BlockHash> ha = hash_full_blocks(a, 4), hb = hash_full_blocks(b, 4);
  REQUIRE(ha.size() == 2);
  REQUIRE(hb.size() == 2);
  CHECK(ha[0] != hb[0]);
  CHECK(ha[1] != hb[1]);  // the same four tokens, after another block
  CHECK(hash_full_blocks(a, 4) == ha);
  CHECK(hash_full_blocks(std::vector<std::int32_t>{1, 2, 3, 4, 9, 9, 9}, 4).size() == 1);  // a partial block has none
  // Through the manager: B shares nothing with A although its second block's tokens are A's.
  KVCacheManager kv(8, 4, true);
  Request ra = request_of(0, {1, 2, 3, 4, 9, 9, 9, 9, 7}), rb = request_of(1, {5, 6, 7, 8, 9, 9, 9, 9, 7});
  admit_and_compute(kv, ra);
  CHECK(admit_and_compute(kv, rb).num_tokens == 0);
  CHECK(kv.prefix_cache_hits() == 0);
}

TEST_CASE("prefix cache: a hit shares whole computed blocks and leaves at least the last token to compute",
          "[lab04][graded]") {
  KVCacheManager kv(16, 4, true);
  // A: 10 tokens = blocks [0, 1] full, block 2 partial.
  Request a = request_of(0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  CHECK(admit_and_compute(kv, a).num_tokens == 0);
  CHECK(kv.block_pool().num_cached_blocks() == 2);  // the partial block is not findable
  CHECK(kv.block_pool().block(2).block_hash == std::nullopt);
  // B: A's 10 tokens and one more: its first two blocks are A's; the partial third is not shared.
  Request b = request_of(1, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const KVCacheManager::ComputedBlocks hit = admit_and_compute(kv, b);
  CHECK(hit.blocks == std::vector<std::int32_t>{0, 1});
  CHECK(hit.num_tokens == 8);
  CHECK(kv.block_table(1).block_ids() == std::vector<std::int32_t>{0, 1, 3});
  CHECK(kv.block_pool().block(0).ref_cnt == 2);
  CHECK(kv.block_pool().block(1).ref_cnt == 2);
  CHECK(kv.block_pool().block(2).ref_cnt == 1);
  // C: exactly A's first 8 tokens, both blocks cached; it still computes its last token (into a new block).
  Request c = request_of(2, {1, 2, 3, 4, 5, 6, 7, 8});
  const KVCacheManager::ComputedBlocks hit_c = kv.get_computed_blocks(c);
  CHECK(hit_c.blocks == std::vector<std::int32_t>{0});
  CHECK(hit_c.num_tokens == 4);
  // D: a 3-token prompt has no full block to share.
  Request d = request_of(3, {1, 2, 3});
  CHECK(kv.get_computed_blocks(d).num_tokens == 0);
  // Queries and hits count tokens of admitted requests.
  CHECK(kv.prefix_cache_queries() == 10 + 11);
  CHECK(kv.prefix_cache_hits() == 8);
  // E has 8 tokens but K/V for 7: its newest token was just sampled. Its second block is full but
  // not computed, so it is not findable until the next step computes that token.
  Request e = request_of(4, {3, 3, 3, 3, 4, 4, 4, 4});
  REQUIRE(kv.allocate_slots(e, 8, kv.get_computed_blocks(e)).has_value());
  e.num_computed_tokens = 7;
  kv.cache_blocks(e);
  CHECK(kv.block_pool().num_cached_blocks() == 3);
  e.num_computed_tokens = 8;
  kv.cache_blocks(e);
  CHECK(kv.block_pool().num_cached_blocks() == 4);
}

TEST_CASE("prefix cache: a shared block leaves the free queue, so eviction never takes a block in use",
          "[lab04][graded]") {
  KVCacheManager kv(4, 4, true);
  Request a = request_of(0, {1, 2, 3, 4, 5, 6, 7, 8, 9});  // 3 blocks: [0, 1, 2]
  admit_and_compute(kv, a);
  kv.free(a);
  // free = [3, 2, 1, 0]: the tail first, so the shared head is evicted last; blocks 0 and 1 stay cached.
  CHECK(free_ids(kv) == std::vector<std::int32_t>{3, 2, 1, 0});
  CHECK(kv.block_pool().num_cached_blocks() == 2);
  Request b = request_of(1, {1, 2, 3, 4, 5, 6, 7, 8, 42});  // shares [0, 1], needs one block for its last token
  const KVCacheManager::ComputedBlocks hit = admit_and_compute(kv, b);
  CHECK(hit.blocks == std::vector<std::int32_t>{0, 1});
  CHECK(kv.block_pool().block(0).ref_cnt == 1);
  CHECK(kv.block_pool().block(1).ref_cnt == 1);
  CHECK(kv.block_table(1).block_ids() == std::vector<std::int32_t>{0, 1, 3});
  CHECK(free_ids(kv) == std::vector<std::int32_t>{2});
  // C wants two blocks: only one is free (blocks 0 and 1 are B's), so it gets none, and B keeps its own.
  Request c = request_of(2, {7, 7, 7, 7, 7});
  CHECK_FALSE(kv.allocate_slots(c, 5, kv.get_computed_blocks(c)).has_value());
  Request e = request_of(3, {7, 7, 7});
  const auto got = kv.allocate_slots(e, 3, kv.get_computed_blocks(e));
  REQUIRE(got.has_value());
  CHECK(*got == std::vector<std::int32_t>{2});
  CHECK(kv.block_pool().num_free_blocks() == 0);
  // B finishes: its blocks are free (tail first) and 0 and 1 are still findable.
  kv.free(b);
  CHECK(free_ids(kv) == std::vector<std::int32_t>{3, 1, 0});
  CHECK(kv.block_pool().block(0).ref_cnt == 0);
  Request f = request_of(4, {1, 2, 3, 4, 5, 6, 7, 8, 1});
  CHECK(kv.get_computed_blocks(f).blocks == std::vector<std::int32_t>{0, 1});
}

TEST_CASE("prefix cache: a freed block stays cached until it is handed out again, least recently freed first",
          "[lab04][graded]") {
  KVCacheManager kv(4, 2, true);
  Request a = request_of(0, {1, 1, 2, 2, 3});  // blocks [0, 1, 2]; 0 and 1 full
  admit_and_compute(kv, a);
  kv.free(a);
  CHECK(free_ids(kv) == std::vector<std::int32_t>{3, 2, 1, 0});
  // X takes two blocks: 3 (never cached) and 2 (A's partial block); A's full blocks stay findable.
  Request x = request_of(1, {9, 9, 9});
  REQUIRE(kv.allocate_slots(x, 3, kv.get_computed_blocks(x)).has_value());
  CHECK(kv.block_table(1).block_ids() == std::vector<std::int32_t>{3, 2});
  Request a2 = request_of(2, {1, 1, 2, 2, 3});
  CHECK(kv.get_computed_blocks(a2).num_tokens == 4);
  // Y takes one more: block 1, A's second block, freed before block 0: it is evicted (forgotten), block 0 is not.
  Request y = request_of(3, {8});
  REQUIRE(kv.allocate_slots(y, 1, kv.get_computed_blocks(y)).has_value());
  CHECK(kv.block_table(3).block_ids() == std::vector<std::int32_t>{1});
  CHECK(kv.block_pool().block(1).block_hash == std::nullopt);
  CHECK(kv.block_pool().num_cached_blocks() == 1);
  const KVCacheManager::ComputedBlocks hit = kv.get_computed_blocks(a2);
  CHECK(hit.blocks == std::vector<std::int32_t>{0});
  CHECK(hit.num_tokens == 2);
}

TEST_CASE("prefix cache: a hit is a prefix, so a missing block ends it whatever is cached after it",
          "[lab04][graded]") {
  KVCacheManager kv(6, 2, true);
  // A and B are admitted in the same step, before either is published: B's first block duplicates A's
  // (not cached again), B's second block is its own and is cached under a hash chained on A's first.
  Request a = request_of(0, {1, 1, 7}), b = request_of(1, {1, 1, 2, 2, 9});
  for (Request* r : {&a, &b}) REQUIRE(kv.allocate_slots(*r, r->num_tokens(), kv.get_computed_blocks(*r)).has_value());
  for (Request* r : {&a, &b}) {
    r->num_computed_tokens = r->num_tokens();
    kv.cache_blocks(*r);
  }
  CHECK(kv.block_pool().num_cached_blocks() == 2);  // A's first block and B's second
  // A finishes and its first block is evicted by X; B's second block, held by B, stays cached.
  kv.free(a);
  Request x = request_of(2, {5, 5, 5, 5, 5});
  REQUIRE(kv.allocate_slots(x, 5, kv.get_computed_blocks(x)).has_value());
  CHECK(kv.block_pool().num_cached_blocks() == 1);
  // B's tokens again: the first block misses, so nothing is a hit (B's second block cannot be a first block).
  Request again = request_of(3, {1, 1, 2, 2, 9});
  CHECK(kv.get_computed_blocks(again).num_tokens == 0);
  CHECK(kv.get_computed_blocks(again).blocks.empty());
}

TEST_CASE("prefix cache: a hit that does not fit takes nothing, its free shared blocks counted against the room",
          "[lab04][graded]") {
  KVCacheManager kv(4, 4, true);
  Request a = request_of(0, {1, 2, 3, 4, 5, 6, 7, 8, 9});  // blocks [0, 1, 2]; 0 and 1 cached
  admit_and_compute(kv, a);
  kv.free(a);
  CHECK(free_ids(kv) == std::vector<std::int32_t>{3, 2, 1, 0});
  // B shares A's 8 tokens and has 9 more: 5 blocks, 2 shared and free, so 3 new ones beside them: 5 > 4.
  Request b = request_of(1, {1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9});
  const KVCacheManager::ComputedBlocks hit = kv.get_computed_blocks(b);
  REQUIRE(hit.num_tokens == 8);
  b.num_computed_tokens = hit.num_tokens;
  CHECK_FALSE(kv.allocate_slots(b, b.num_uncomputed_tokens(), hit).has_value());
  CHECK(free_ids(kv) == std::vector<std::int32_t>{3, 2, 1, 0});
  CHECK(kv.block_pool().block(0).ref_cnt == 0);
  CHECK(kv.block_table(1).num_blocks() == 0);
  CHECK(kv.prefix_cache_queries() == 9);  // only A was admitted
}

TEST_CASE("prefix caching gives the same tokens at temperature 0, with hits, and when a full cache evicts",
          "[lab04][graded]") {
  auto model = test::deterministic_tiny();
  const int vocab = model->config().vocab_size;
  const auto system = synthetic_prompt(24, vocab, 7);
  std::vector<std::vector<std::int32_t>> prompts;
  for (std::uint64_t i = 0; i < 6; ++i) {
    auto p = system;
    const auto own = synthetic_prompt(3 + static_cast<int>(i), vocab, 100 + i);
    p.insert(p.end(), own.begin(), own.end());
    prompts.push_back(p);
  }
  prompts.push_back(prompts[0]);  // a repeat: all but its last token cached
  // A pool of 12 blocks of 4 tokens cannot keep every request's blocks: later ones evict earlier ones'.
  for (const int num_blocks : {64, 12}) {
    std::vector<std::vector<std::int32_t>> outputs[2];
    long hits = 0;
    for (const bool caching : {false, true}) {
      EngineConfig config;
      config.scheduler = {SchedulingPolicy::CONTINUOUS, 2, 256};
      config.block_size = 4;
      config.num_gpu_blocks_override = num_blocks;
      config.enable_prefix_caching = caching;
      Engine engine(*model, config);
      for (const auto& p : prompts) engine.add_request(p, SamplingParams{}, 6);
      for (int steps = 0; engine.has_unfinished_requests() && steps < 500; ++steps) engine.step();
      REQUIRE_FALSE(engine.has_unfinished_requests());
      for (const Request* r : engine.requests())
        outputs[caching].emplace_back(r->output_token_ids().begin(), r->output_token_ids().end());
      hits = engine.kv_cache_manager().prefix_cache_hits();
      CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() == num_blocks);
    }
    CHECK(outputs[0] == outputs[1]);
    CHECK(hits >= 5 * 24);  // every request after the first two shares the system prompt's 6 blocks
  }
}
