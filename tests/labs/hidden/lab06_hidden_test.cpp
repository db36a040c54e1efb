// SPDX-License-Identifier: MIT
// Hidden lab 06 tests: the chunk rule over a random workload, checked
// against the rule itself step by step, and a preempted chunked request.
#include <algorithm>
#include <map>

#include "core/random.h"
#include "sched/scheduler_sim.h"
#include "test_util.h"

using namespace servelab;
using test::Sim;

TEST_CASE("hidden: every share of a random chunked workload is min(uncomputed, budget left, threshold)",
          "[lab06][hidden]") {
  const int budget = 40, threshold = 24;
  Sim sim({.policy = SchedulingPolicy::CONTINUOUS,
           .max_num_seqs = 8,
           .max_num_batched_tokens = budget,
           .enable_chunked_prefill = true,
           .long_prefill_token_threshold = threshold},
          1000, 4);
  SplitMix64 rng(3);
  for (int i = 0; i < 20; ++i) sim.add(rng.uniform_int(1, 90), rng.uniform_int(1, 6));
  for (int steps = 0; sim.scheduler.has_unfinished_requests(); ++steps) {
    REQUIRE(steps < 2000);
    std::map<int, int> uncomputed;
    for (const Request* r : sim.scheduler.running()) uncomputed[r->request_id] = r->num_uncomputed_tokens();
    for (const Request* r : sim.scheduler.waiting()) uncomputed[r->request_id] = r->num_uncomputed_tokens();
    sim.step();
    int left = budget;
    for (const ScheduledRequest& s : sim.last.scheduled) {
      INFO("step " << steps << " request " << s.request->request_id);
      CHECK(s.num_new_tokens == std::min({uncomputed[s.request->request_id], left, threshold}));
      left -= s.num_new_tokens;
    }
  }
  for (const Request& r : sim.requests) CHECK(r.is_finished());
  CHECK(sim.all_blocks_free());
}

TEST_CASE("hidden: a chunked request preempted mid-prompt starts its chunks again from token 0", "[lab06][hidden]") {
  // 5 blocks of 4 tokens: A decodes; B's 16-token prompt comes in chunks of 4 until the blocks run out and B,
  // the newest, is preempted; it is recomputed from its first token and finishes.
  Sim sim({.policy = SchedulingPolicy::CONTINUOUS,
           .max_num_seqs = 4,
           .max_num_batched_tokens = 5,
           .enable_chunked_prefill = true,
           .long_prefill_token_threshold = 4},
          5, 4);
  Request& a = sim.add(3, 8);
  CHECK(sim.step() == "A:3");
  Request& b = sim.add(16, 1);
  CHECK(sim.step() == "A:1 B:4");
  CHECK(b.num_computed_tokens == 4);
  CHECK(sim.step() == "A:1 B:4");
  CHECK(b.num_computed_tokens == 8);
  CHECK(sim.step() == "A:1 B:4");
  CHECK(b.num_computed_tokens == 12);
  CHECK(sim.step() == "A:1");  // B needs a 4th block, A holds 2 and B 3: B is preempted
  CHECK(b.num_preemptions == 1);
  CHECK(b.num_computed_tokens == 0);
  for (int steps = 0; !(a.is_finished() && b.is_finished()); ++steps) {
    REQUIRE(steps < 100);
    sim.step();
  }
  CHECK(b.num_output_tokens() == 1);
  CHECK(sim.all_blocks_free());
}
