// SPDX-License-Identifier: MIT
// The scheduler, driven by hand with no model: requests are made here,
// schedule() says who runs with how many tokens, and update_from_output()
// receives made-up sampled tokens. Each step's plan is written "A:3 B:1"
// (request A computes 3 tokens, B 1), so a script reads like a timeline.
#include <deque>
#include <string>
#include <vector>

#include "core/error.h"
#include "sched/scheduler.h"
#include "scheduler_sim.h"
#include "test_util.h"

using namespace servelab;
using test::Ids;
using test::Sim;

TEST_CASE("one_at_a_time runs one request to the end before the next starts", "[scheduler]") {
  Sim sim(SchedulingPolicy::ONE_AT_A_TIME, 16, 64, 16, 4);
  sim.add(3, 2);               // A
  sim.add(2, 2);               // B
  sim.add(4, 1);               // C
  CHECK(sim.step() == "A:3");  // A's prompt; B and C wait although there is room
  CHECK(sim.waiting() == "B C");
  CHECK(sim.step() == "A:1");  // A's second token ends it (max_tokens 2)
  CHECK(sim.requests[0].is_finished());
  CHECK(sim.step() == "B:2");
  CHECK(sim.step() == "B:1");
  CHECK(sim.step() == "C:4");  // C ends after its prompt: max_tokens 1
  CHECK(sim.step() == "");
  CHECK_FALSE(sim.scheduler.has_unfinished_requests());
  CHECK(sim.outputs(sim.requests[0]) == Ids{100, 101});
  CHECK(sim.outputs(sim.requests[1]) == Ids{200, 201});
  CHECK(sim.outputs(sim.requests[2]) == Ids{300});
  CHECK(sim.requests[0].finish_reason == FinishReason::LENGTH);
  CHECK(sim.all_blocks_free());
}

TEST_CASE("static batching forms a batch and admits nobody until all of it has finished", "[scheduler]") {
  Sim sim(SchedulingPolicy::STATIC, 2, 64, 16, 4);
  sim.add(3, 1);                   // A: done after its prompt
  sim.add(3, 3);                   // B: three tokens
  sim.add(2, 1);                   // C
  sim.add(2, 1);                   // D
  CHECK(sim.step() == "A:3 B:3");  // a batch of max_num_seqs = 2
  // A finished; a seat is free, but C may not join a running static batch.
  CHECK(sim.running() == "B");
  CHECK(sim.step() == "B:1");
  CHECK(sim.waiting() == "C D");
  CHECK(sim.step() == "B:1");  // B's last token: the batch has drained
  CHECK(sim.running() == "");
  CHECK(sim.step() == "C:2 D:2");  // the next batch forms
  CHECK(sim.step() == "");
  CHECK(sim.all_blocks_free());
}

TEST_CASE("continuous batching admits waiting requests at every step within max_num_seqs", "[scheduler]") {
  Sim sim(SchedulingPolicy::CONTINUOUS, 2, 64, 16, 4);
  sim.add(3, 1);                   // A
  sim.add(3, 3);                   // B
  sim.add(2, 2);                   // C
  sim.add(2, 1);                   // D
  CHECK(sim.step() == "A:3 B:3");  // max_num_seqs = 2: C and D wait
  CHECK(sim.waiting() == "C D");
  CHECK(sim.step() == "B:1 C:2");  // A left, C joins at once, beside B's decode
  CHECK(sim.step() == "B:1 C:1");  // both finish here; D still had no seat
  CHECK(sim.waiting() == "D");
  CHECK(sim.step() == "D:2");
  CHECK(sim.step() == "");
  CHECK(sim.all_blocks_free());
}

TEST_CASE("continuous batching keeps each step within the token budget and never lets the head be overtaken",
          "[scheduler][fcfs]") {
  Sim sim(SchedulingPolicy::CONTINUOUS, 8, 5, 16, 4);  // token budget 5
  sim.add(3, 4);                                       // A
  sim.add(3, 2);                                       // B
  sim.add(2, 1);                                       // C: would fit beside A in step 1, but B is ahead of it
  CHECK(sim.step() == "A:3");                          // 3 + B's 3 > 5; C (2) fits but FCFS: nobody overtakes B
  CHECK(sim.last.total_num_scheduled_tokens == 3);
  CHECK(sim.waiting() == "B C");
  CHECK(sim.step() == "A:1 B:3");  // 4 tokens; C would make 6
  CHECK(sim.last.total_num_scheduled_tokens == 4);
  CHECK(sim.step() == "A:1 B:1 C:2");  // B finishes
  CHECK(sim.last.total_num_scheduled_tokens == 4);
  CHECK(sim.step() == "A:1");  // A's fourth token
  CHECK(sim.step() == "");
  CHECK(sim.all_blocks_free());
}

TEST_CASE("a prompt larger than the token budget waits until it can run alone", "[scheduler]") {
  Sim sim(SchedulingPolicy::CONTINUOUS, 8, 4, 16, 4);  // token budget 4
  sim.add(2, 3);                                       // A
  sim.add(6, 1);                                       // B: 6 tokens, more than the budget
  sim.add(1, 1);                                       // C: small, but behind B
  CHECK(sim.step() == "A:2");
  CHECK(sim.step() == "A:1");
  CHECK(sim.waiting() == "B C");
  CHECK(sim.step() == "A:1");  // A finishes
  CHECK(sim.step() == "B:6");  // alone, so it may exceed the budget rather than wait forever
  CHECK(sim.step() == "C:1");
  CHECK(sim.all_blocks_free());
}

TEST_CASE("continuous batching waits for KV blocks in FCFS order without preempting for newcomers",
          "[scheduler][fcfs]") {
  Sim sim(SchedulingPolicy::CONTINUOUS, 8, 64, 3, 4);  // 3 blocks of 4 tokens
  sim.add(7, 2);                                       // A: 2 blocks
  sim.add(5, 1);                                       // B: 2 blocks, only 1 left
  sim.add(2, 1);                                       // C: 1 block would fit, but B is first in line
  CHECK(sim.step() == "A:7");
  // pool now: free=[2], A -> [0,1]
  CHECK(sim.step() == "A:1");  // B waits for blocks, C waits behind B, nobody is preempted for them
  CHECK(sim.last.preempted_request_ids.empty());
  CHECK(sim.waiting() == "B C");
  CHECK(sim.step() == "B:5 C:2");  // A finished and freed its blocks
  CHECK(sim.scheduler.num_preemptions() == 0);
}

TEST_CASE("preemption by recompute: the newest running request loses its blocks and goes first in line",
          "[scheduler][preemption]") {
  // 4 blocks of 2 tokens: A and B take 2 blocks each for their prompts and fill the pool.
  Sim sim(SchedulingPolicy::CONTINUOUS, 2, 64, 4, 2);
  Request& a = sim.add(3, 3);
  Request& b = sim.add(3, 3);
  sim.add(2, 1);  // C waits: max_num_seqs = 2
  CHECK(sim.step() == "A:3 B:3");
  // pool now: free=[], A -> [0,1], B -> [2,3]; each has 4 tokens, 3 computed
  CHECK(sim.table(a) == Ids{0, 1});
  CHECK(sim.table(b) == Ids{2, 3});
  CHECK(sim.step() == "A:1 B:1");  // token 4 of each fits its second block
  // each has 5 tokens, 4 computed: the next token needs a third block and none is free
  CHECK(sim.outputs(b) == Ids{200, 201});
  REQUIRE(sim.log.empty());

  CHECK(sim.step() == "A:1");
  // B (the newest) was preempted so A could grow.  pool now: free=[3], A -> [0,1,2]
  CHECK(sim.last.preempted_request_ids == std::vector<int>{1});
  CHECK(sim.scheduler.num_preemptions() == 1);
  CHECK(b.status == RequestStatus::PREEMPTED);
  CHECK(b.num_preemptions == 1);
  CHECK(b.num_computed_tokens == 0);       // its KV is gone ...
  CHECK(sim.outputs(b) == Ids{200, 201});  // ... but its outputs are kept
  CHECK(sim.table(b).empty());
  CHECK(sim.waiting() == "B C");  // at the front, ahead of C who arrived later
  // one log line naming the request and the tokens thrown away
  REQUIRE(sim.log.size() == 1);
  CHECK_THAT(sim.log[0], Catch::Contains("request 1") && Catch::Contains("4 computed tokens thrown away") &&
                             Catch::Contains("2 blocks freed"));
  // A finished in that step (3 outputs): pool now: free=[3,0,1,2]

  // Resumption recomputes B's prompt and both outputs (3 + 2 = 5 tokens) and samples its third token.
  CHECK(sim.step() == "B:5 C:2");
  CHECK(sim.outputs(b) == Ids{200, 201, 202});
  CHECK(b.is_finished());
  CHECK(sim.outputs(a) == Ids{100, 101, 102});
  CHECK(sim.step() == "");
  CHECK(sim.all_blocks_free());
  CHECK(sim.log.size() == 1);
}

TEST_CASE("a running request that cannot grow and is itself the newest preempts itself", "[scheduler][preemption]") {
  Sim sim(SchedulingPolicy::CONTINUOUS, 4, 64, 4, 2);
  Request& a = sim.add(3, 4);  // 2 blocks for 3 tokens, room for a 4th
  Request& b = sim.add(4, 4);  // 2 blocks, full after its prompt
  CHECK(sim.step() == "A:3 B:4");
  // pool now: free=[]; B has 5 tokens and needs a third block, A's 4th token fits
  CHECK(sim.step() == "A:1");
  CHECK(sim.last.preempted_request_ids == std::vector<int>{1});
  CHECK(b.status == RequestStatus::PREEMPTED);
  CHECK(a.status == RequestStatus::RUNNING);
  CHECK(sim.waiting() == "B");
  REQUIRE(sim.log.size() == 1);
  CHECK_THAT(sim.log[0], Catch::Contains("request 1") && Catch::Contains("4 computed tokens thrown away"));
  CHECK(sim.step() == "A:1");  // A's third block comes from B's freed ones; B (5 tokens, 3 blocks) still does not fit
  CHECK(sim.step() == "A:1");  // A's fourth and last token
  CHECK(sim.waiting() == "B");
  // B resumes: prompt (4) + its one output recomputed together, then decodes on.
  CHECK(sim.step() == "B:5");
  CHECK(sim.step() == "B:1");
  CHECK(sim.step() == "B:1");
  CHECK(sim.outputs(a) == Ids{100, 101, 102, 103});
  CHECK(sim.outputs(b) == Ids{200, 201, 202, 203});
  CHECK(sim.all_blocks_free());
  CHECK(sim.log.size() == 1);
}

TEST_CASE("abort frees the blocks of a running request and removes a waiting one", "[scheduler][abort]") {
  Sim sim(SchedulingPolicy::CONTINUOUS, 1, 64, 4, 4);
  Request& a = sim.add(5, 8);
  Request& b = sim.add(2, 8);
  CHECK(sim.step() == "A:5");  // max_num_seqs 1: B waits
  CHECK(sim.table(a).size() == 2);
  CHECK(sim.scheduler.abort_request(&b, 1.5));
  CHECK(b.status == RequestStatus::FINISHED);
  CHECK(b.finish_reason == FinishReason::ABORT);
  CHECK(b.times.finished == 1.5);
  CHECK(sim.waiting() == "");
  CHECK(sim.scheduler.abort_request(&a, 2.0));
  CHECK(a.finish_reason == FinishReason::ABORT);
  CHECK(sim.running() == "");
  CHECK(sim.table(a).empty());
  CHECK(sim.all_blocks_free());
  CHECK_FALSE(sim.scheduler.has_unfinished_requests());
  CHECK_FALSE(sim.scheduler.abort_request(&a, 3.0));  // already finished
  CHECK(a.times.finished == 2.0);
  CHECK(sim.step() == "");
}

TEST_CASE("finished requests leave the running set and return their blocks in the step they finish", "[scheduler]") {
  Sim sim(SchedulingPolicy::CONTINUOUS, 4, 64, 8, 4);
  Request& a = sim.add(4, 1);
  sim.add(4, 2);
  sim.step();
  CHECK(a.is_finished());
  CHECK(a.finish_reason == FinishReason::LENGTH);
  CHECK(sim.table(a).empty());
  CHECK(sim.kv.block_pool().num_free_blocks() == 8 - 1);  // only B's one block is held
  CHECK(sim.running() == "B");
}

TEST_CASE("a stop token finishes a request before max_tokens", "[scheduler]") {
  KVCacheManager kv(4, 4);
  Scheduler scheduler({.policy = SchedulingPolicy::CONTINUOUS, .max_num_seqs = 4, .max_num_batched_tokens = 64}, kv);
  Request r(0, Ids{1, 2}, SamplingParams{}, 10, Ids{7}, 0.0);
  scheduler.add_request(&r);
  auto out = scheduler.schedule();
  CHECK(scheduler.update_from_output(out, Ids{5}, 0.1).empty());
  out = scheduler.schedule();
  const auto finished = scheduler.update_from_output(out, Ids{7}, 0.2);
  REQUIRE(finished.size() == 1);
  CHECK(finished[0] == &r);
  CHECK(r.finish_reason == FinishReason::STOP);
  CHECK(r.num_output_tokens() == 2);
  CHECK(kv.block_pool().num_free_blocks() == 4);
}

TEST_CASE("update_from_output refuses a sampled-token count that does not match the plan", "[scheduler][bad-input]") {
  KVCacheManager kv(4, 4);
  Scheduler scheduler({.policy = SchedulingPolicy::CONTINUOUS, .max_num_seqs = 4, .max_num_batched_tokens = 64}, kv);
  Request r(0, Ids{1, 2}, SamplingParams{}, 10, Ids{}, 0.0);
  scheduler.add_request(&r);
  const auto out = scheduler.schedule();
  REQUIRE_ERROR_MENTIONS(scheduler.update_from_output(out, Ids{}, 0.1), "fewer sampled tokens");
}

TEST_CASE("scheduler refuses non-positive limits by name", "[scheduler][bad-input]") {
  KVCacheManager kv(4, 4);
  REQUIRE_ERROR_MENTIONS(Scheduler({.policy = SchedulingPolicy::CONTINUOUS, .max_num_seqs = 0}, kv), "--max-num-seqs",
                         "got 0");
  REQUIRE_ERROR_MENTIONS(
      Scheduler({.policy = SchedulingPolicy::STATIC, .max_num_seqs = 4, .max_num_batched_tokens = -1}, kv),
      "--max-num-batched-tokens", "got -1");
  CHECK(parse_scheduling_policy("static", "--policy") == SchedulingPolicy::STATIC);
  REQUIRE_ERROR_MENTIONS(parse_scheduling_policy("fifo", "--policy"), "--policy", "fifo", "one_at_a_time",
                         "continuous");
}
