// SPDX-License-Identifier: MIT
// Graded tests of what a lab 06 student writes (the LAB06 regions): the
// chunk rule, min(uncomputed, budget left, long_prefill_token_threshold),
// step by step where each of the three limits binds, and what a chunk that
// does not catch up leaves in its request. Each one fails on the wrong
// implementations in tests/labs/mutants/lab06/.
#include "sched/scheduler_sim.h"
#include "test_util.h"

using namespace servelab;
using test::Sim;

namespace {

SchedulerConfig graded_chunked(int budget, int threshold) {
  return {.policy = SchedulingPolicy::CONTINUOUS,
          .max_num_seqs = 16,
          .max_num_batched_tokens = budget,
          .enable_chunked_prefill = true,
          .long_prefill_token_threshold = threshold};
}

}  // namespace

TEST_CASE("the chunk is min(uncomputed, budget left, threshold): each limit binds in turn", "[lab06][graded]") {
  SECTION("the threshold binds below the budget, the prompt's remainder last") {
    Sim sim(graded_chunked(10, 4), 64, 4);
    sim.add(9, 2);  // A
    CHECK(sim.step() == "A:4");
    CHECK(sim.step() == "A:4");
    CHECK(sim.step() == "A:1");  // the last chunk is what is left of the prompt
    CHECK(sim.step() == "A:1");  // a decode
  }
  SECTION("no threshold (0): the budget binds") {
    Sim sim(graded_chunked(10, 0), 64, 4);
    sim.add(25, 1);
    CHECK(sim.step() == "A:10");
    CHECK(sim.step() == "A:10");
    CHECK(sim.step() == "A:5");
  }
  SECTION("the budget left after the decodes binds, then the threshold") {
    Sim sim(graded_chunked(8, 0), 64, 4);
    sim.add(2, 10);
    sim.add(3, 10);
    CHECK(sim.step() == "A:2 B:3");
    sim.add(20, 1);
    CHECK(sim.step() == "A:1 B:1 C:6");  // 8 - 2 decodes
    Sim capped(graded_chunked(8, 5), 64, 4);
    capped.add(2, 10);
    capped.add(3, 10);
    CHECK(capped.step() == "A:2 B:3");
    capped.add(20, 1);
    CHECK(capped.step() == "A:1 B:1 C:5");  // the threshold, below the 6 left
  }
  SECTION("two prompts share what the decodes left, each within the threshold") {
    Sim sim(graded_chunked(12, 4), 64, 4);
    sim.add(1, 10);
    CHECK(sim.step() == "A:1");
    sim.add(20, 1);
    sim.add(20, 1);
    CHECK(sim.step() == "A:1 B:4 C:4");
    Sim tight(graded_chunked(7, 4), 64, 4);
    tight.add(1, 10);
    CHECK(tight.step() == "A:1");
    tight.add(20, 1);
    tight.add(20, 1);
    CHECK(tight.step() == "A:1 B:4 C:2");  // C gets the 2 tokens the budget has left
    CHECK(tight.last.total_num_scheduled_tokens == 7);
  }
}

TEST_CASE("a chunk that does not catch up advances num_computed_tokens by the chunk and samples nothing",
          "[lab06][graded]") {
  Sim sim(graded_chunked(8, 0), 64, 4);
  Request& a = sim.add(20, 3);
  CHECK(sim.step() == "A:8");
  CHECK(a.num_computed_tokens == 8);
  CHECK(a.num_output_tokens() == 0);
  CHECK(a.status == RequestStatus::RUNNING);
  CHECK(sim.running() == "A");
  CHECK(sim.kv.block_table(0).num_blocks() == 2);  // the chunk's KV stays
  CHECK(sim.step() == "A:8");
  CHECK(a.num_computed_tokens == 16);
  CHECK(a.num_output_tokens() == 0);
  CHECK(sim.step() == "A:4");  // catches up: its first token
  CHECK(a.num_computed_tokens == 20);
  REQUIRE(a.num_output_tokens() == 1);
  CHECK(a.output_token_ids()[0] == 100);
  CHECK(sim.step() == "A:1");
  CHECK(a.num_computed_tokens == 21);
}
