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
