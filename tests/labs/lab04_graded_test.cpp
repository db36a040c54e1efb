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
  // Blocks of 4 tokens, 5 blocks. A (6 tokens) and B (5) take 2 blocks each; C (4) would need a 5th and 6th.
  KVCacheManager kv(5, 4);
  Scheduler s({SchedulingPolicy::CONTINUOUS, 2, 64}, kv);
  Request a(0, std::vector<std::int32_t>(6, 1), {}, 10, {}, 0), b(1, std::vector<std::int32_t>(5, 1), {}, 10, {}, 0),
      c(2, std::vector<std::int32_t>(4, 1), {}, 10, {}, 0);
  for (Request* r : {&a, &b, &c}) s.add_request(r);
  SchedulerOutput out = s.schedule();  // max_num_seqs 2: A and B, C waits
  REQUIRE(out.scheduled.size() == 2);
  CHECK(out.scheduled[0].request == &a);
  CHECK(out.scheduled[0].num_new_tokens == 6);
  CHECK(out.scheduled[1].request == &b);
  CHECK(kv.block_pool().num_free_blocks() == 1);
  CHECK(s.waiting().front() == &c);
  s.update_from_output(out, {3, 3}, 1.0);  // A: 7 tokens (2 blocks), B: 6 (2 blocks)
  // A and B decode; A's 8th token fits its 2nd block, B's 7th too. Then A needs a 3rd block (token 9).
  out = s.schedule();
  s.update_from_output(out, {3, 3}, 2.0);  // A: 8 tokens, B: 7
  out = s.schedule();                      // A takes the last free block for its 9th token; B fits
  CHECK(out.preempted_request_ids.empty());
  CHECK(kv.block_pool().num_free_blocks() == 0);
  s.update_from_output(out, {3, 3}, 3.0);  // A: 9 tokens, B: 8
  out = s.schedule();                      // B's 9th token needs a block: B, the newest, is preempted
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
  // Nobody is admitted in the step that preempted; the next step admits B (recomputing its 9 tokens) first.
  CHECK(s.running().size() == 1);
  s.update_from_output(out, {3}, 4.0);  // A: 10 tokens
  out = s.schedule();
  REQUIRE(out.scheduled.size() == 2);
  CHECK(out.scheduled[1].request == &b);
  CHECK(out.scheduled[1].num_new_tokens == 8);  // its 5 prompt + 3 output tokens so far, recomputed
  CHECK(b.status == RequestStatus::RUNNING);
  CHECK(s.waiting().front() == &c);
}

TEST_CASE("the engine with a cache computes one token per decode, without it the whole sequence again", "[lab04][graded]") {
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
      CHECK(engine.step().size() == 1);  // every step samples the request's next token
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
