// SPDX-License-Identifier: MIT
// The replay driver (engine/serve/replay.h): requests join at their arrival
// times, the engine idles between them (skipping ahead on a simulated clock,
// sleeping on the wall clock), a cap on requests in flight holds, a step that
// can schedule nothing is an error instead of a spin, and the driver gives the
// tokens and times of the hand-written loop the labs used to carry.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/error.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "perf/hardware.h"
#include "serve/engine.h"
#include "serve/replay.h"
#include "test_util.h"
#include "workload/synthetic_prompt.h"
#include "workload/workload.h"

using namespace servelab;

namespace {

using Ids = std::vector<std::int32_t>;

SimulatedModel llama_on_h100() {
  return {preset("llama-3-8b"), CostModel::for_hardware(gpu("H100 SXM"), 0.002),
          StepDtypes{DType::BF16, DType::BF16, DType::BF16}};
}

/// Lab 06's switches on 1 GiB of KV: 8,192 Llama-3-8B tokens in 512 blocks of 16.
EngineConfig chunked_config() {
  return {.scheduler = {SchedulingPolicy::CONTINUOUS, 64, 2048, true, 0},
          .kv_cache_memory = std::size_t{1} << 30,
          .log = [](const std::string&) {}};
}

WorkloadRequest request(double arrival, int prompt_len, int max_tokens) {
  return {arrival, Ids(static_cast<std::size_t>(prompt_len), 1), max_tokens};
}

/// The tiny preset (2 layers, vocab 512) with batch-invariant reductions.
std::unique_ptr<Model> tiny_model() {
  ModelOptions options;
  options.deterministic = true;
  options.num_threads = 2;
  return Model::from_preset("tiny", 7, options);
}

EngineConfig tiny_config(const Model& model) {
  return {.scheduler = {SchedulingPolicy::CONTINUOUS, 4, 256, false, 0},
          .block_size = 4,
          .kv_cache_memory = kv_cache_bytes_for(model.config(), 64, 4),
          .log = [](const std::string&) {}};
}

}  // namespace

TEST_CASE("a simulated replay skips the clock ahead to each arrival instead of stepping an empty engine", "[replay]") {
  Engine engine(llama_on_h100(), chunked_config());
  const ReplayResult r = replay(engine, {request(0.0, 512, 2), request(10.0, 512, 3)});
  REQUIRE(r.request_ids.size() == 2);
  const RequestTimes &first = engine.request(r.request_ids[0]).times, &second = engine.request(r.request_ids[1]).times;
  CHECK(first.finished < 1.0);  // done long before the second arrives: the engine is empty until 10 s
  CHECK(second.arrival == 10.0);
  CHECK(second.first_scheduled == 10.0);  // exact: its first step started at the time the clock jumped to
  CHECK(r.num_steps == 5);                // 2 + 3 tokens, one step each: no step while idle
  CHECK(r.num_tokens == 5);
  CHECK(r.start == 0.0);
  CHECK(r.last_token_time == engine.now());
  CHECK(r.output_tokens_per_second() == Approx(5.0 / engine.now()));
}

TEST_CASE("a real replay sleeps until an arrival, counted from the engine clock at the call", "[replay]") {
  auto model = tiny_model();
  Engine engine(*model, tiny_config(*model));
  const ReplayResult r = replay(engine, {request(0.0, 8, 2), request(0.3, 8, 2)});
  const RequestTimes& second = engine.request(r.request_ids.at(1)).times;
  CHECK(second.arrival == Approx(r.start + 0.3));
  CHECK(second.first_scheduled >= second.arrival);
  CHECK(r.num_steps == 4);  // the tiny model's 2 + 2 steps take milliseconds: the wait was slept, not stepped
}

TEST_CASE("max_concurrency keeps at most that many workload requests in the engine, the rest wait their turn",
          "[replay]") {
  Engine engine(llama_on_h100(), chunked_config());
  const std::vector<WorkloadRequest> workload(6, request(0.0, 64, 4));
  int most_in_engine = 0;
  ReplayOptions options;
  options.max_concurrency = 2;
  options.on_step = [&](Engine&, const StepStats& s, std::span<const RequestOutput> outputs) {
    int finished = 0;
    for (const RequestOutput& out : outputs) finished += out.finish_reason != FinishReason::NONE;
    most_in_engine = std::max(most_in_engine, s.num_running + s.num_waiting + finished);
  };
  const ReplayResult r = replay(engine, workload, options);
  CHECK(most_in_engine == 2);
  REQUIRE(r.request_ids.size() == 6);
  CHECK(r.num_tokens == 24);
  const RequestTimes &first = engine.request(r.request_ids[0]).times, &third = engine.request(r.request_ids[2]).times;
  CHECK(third.arrival == 0.0);                     // its workload time: the wait for a slot is in its TTFT
  CHECK(third.first_scheduled >= first.finished);  // it joined only when one of the first two left

  options.max_concurrency = 0;
  Engine uncapped(llama_on_h100(), chunked_config());
  most_in_engine = 0;
  replay(uncapped, workload, options);
  CHECK(most_in_engine == 6);

  options.max_concurrency = -1;
  REQUIRE_ERROR_MENTIONS(replay(uncapped, workload, options), "--max-concurrency", ">= 0");
}

TEST_CASE("a step that schedules nothing, with no arrival left to change that, is an error instead of a spin",
          "[replay]") {
  Engine engine(llama_on_h100(), chunked_config());
  // The engine refuses a request that could never fit its whole cache, so a request that can never get
  // blocks needs them taken from outside: a stand-in holds every block of the engine's own manager
  // (reached through its const accessor; the manager itself is not const).
  auto& kv = const_cast<KVCacheManager&>(engine.kv_cache_manager());
  const Request hog(999, Ids{1}, SamplingParams{}, 1, {}, 0.0);
  REQUIRE(kv.allocate_slots(hog, engine.num_blocks() * engine.config().block_size).has_value());
  // pool now: free = [], the stand-in -> every block; a 64-token request needs 4 of them

  SECTION("with nothing left to arrive") {
    REQUIRE_ERROR_MENTIONS(replay(engine, {request(0.0, 64, 4)}), "could schedule none of its 1 unfinished",
                           "512 of 512 KV blocks", "no arrival is left");
  }
  SECTION("a later arrival is waited for first: it could have changed the engine's state") {
    REQUIRE_ERROR_MENTIONS(replay(engine, {request(0.0, 64, 4), request(5.0, 64, 4)}), "none of its 2 unfinished");
    CHECK(engine.now() == 5.0);
  }
}

TEST_CASE("a workload out of arrival order is refused before anything runs", "[replay]") {
  Engine engine(llama_on_h100(), chunked_config());
  REQUIRE_ERROR_MENTIONS(replay(engine, {request(1.0, 8, 2), request(0.5, 8, 2)}), "not in arrival order", "request 1");
  CHECK_FALSE(engine.has_unfinished_requests());
}

TEST_CASE("on_step may add requests keyed to step numbers, and the replay serves those and the ones queued before it",
          "[replay]") {
  Engine engine(llama_on_h100(), chunked_config());
  engine.add_request(Ids(32, 1), SamplingParams{}, 4);
  std::vector<int> added;
  ReplayOptions options;
  options.on_step = [&](Engine& e, const StepStats&, std::span<const RequestOutput>) {
    if (added.empty()) added.push_back(e.add_request(Ids(32, 2), SamplingParams{}, 3));  // joins before step 2
  };
  const ReplayResult r = replay(engine, {}, options);
  CHECK(r.request_ids.empty());
  CHECK(r.num_tokens == 7);
  CHECK(engine.request(added.at(0)).is_finished());
  CHECK_FALSE(engine.has_unfinished_requests());
}

TEST_CASE("a replay gives the tokens and times of the hand-written loop it replaced", "[replay]") {
  SECTION("simulated: the same steps and times to the last bit, preemptions included") {
    WorkloadSpec spec;
    spec.num_requests = 60;
    spec.prompt_len = parse_length_dist("lognormal:600:1:16:4000", LengthRole::prompt, "prompt");
    spec.output_len = parse_length_dist("lognormal:200:1:4:1000", LengthRole::output, "output");
    spec.arrivals = parse_arrivals("poisson:40", "arrivals");
    const SimulatedModel sim = llama_on_h100();
    const std::vector<WorkloadRequest> workload = make_workload(spec, sim.config.vocab_size);
    Engine driven(sim, chunked_config()), by_hand(sim, chunked_config());
    const ReplayResult r = replay(driven, workload);
    // The loop lab 06's simulate() and the simulated fleet carried before the driver.
    std::size_t next = 0;
    long steps = 0;
    while (next < workload.size() || by_hand.has_unfinished_requests()) {
      if (!by_hand.has_unfinished_requests()) by_hand.advance_clock_to(workload[next].arrival_s);
      for (; next < workload.size() && workload[next].arrival_s <= by_hand.now(); ++next)
        by_hand.add_request(workload[next].prompt_ids, SamplingParams{}, workload[next].max_tokens, {},
                            workload[next].arrival_s);
      by_hand.step();
      ++steps;
    }
    CHECK(driven.scheduler().num_preemptions() > 0);
    CHECK(driven.scheduler().num_preemptions() == by_hand.scheduler().num_preemptions());
    CHECK(r.num_steps == steps);
    CHECK(driven.now() == by_hand.now());
    const auto a = driven.requests(), b = by_hand.requests();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      REQUIRE(a[i]->request_id == r.request_ids[i]);
      CHECK(a[i]->times.token_times == b[i]->times.token_times);
      CHECK(a[i]->times.first_scheduled == b[i]->times.first_scheduled);
    }
  }
  SECTION("real: the same tokens, and on_step sees each of them as it is emitted") {
    auto model = tiny_model();
    std::vector<WorkloadRequest> workload;
    for (int i = 0; i < 6; ++i) workload.push_back({0.0, synthetic_prompt(5 + 7 * i, 512, i), 3 + 2 * i});
    Engine driven(*model, tiny_config(*model)), by_hand(*model, tiny_config(*model));
    std::map<int, Ids> streamed;
    ReplayOptions options;
    options.on_step = [&](Engine&, const StepStats&, std::span<const RequestOutput> outputs) {
      for (const RequestOutput& out : outputs) streamed[out.request_id].push_back(out.token);
    };
    const ReplayResult r = replay(driven, workload, options);
    for (const WorkloadRequest& w : workload) by_hand.add_request(w.prompt_ids, SamplingParams{}, w.max_tokens);
    long steps = 0;
    for (; by_hand.has_unfinished_requests(); ++steps) by_hand.step();
    CHECK(r.num_steps == steps);
    for (std::size_t i = 0; i < workload.size(); ++i) {
      const auto ids = by_hand.request(static_cast<int>(i)).output_token_ids();
      const Ids expected(ids.begin(), ids.end());
      CHECK(streamed.at(r.request_ids[i]) == expected);
      CHECK(expected.size() == static_cast<std::size_t>(workload[i].max_tokens));
    }
  }
}
