// SPDX-License-Identifier: MIT
// Simulated fleets (engine/disagg/simulated_fleet.h): colocated and xPyD instances on
// lab 06's simulated clock, the KV transfer timed by a link. Times are simulated, so
// exact: each is checked against the cost model's own predictions.
#include <catch2/catch.hpp>

#include "config/model_config.h"
#include "core/error.h"
#include "disagg/link.h"
#include "disagg/simulated_fleet.h"
#include "perf/hardware.h"
#include "test_util.h"

namespace servelab::disagg {
namespace {

SimulatedModel llama_on(const std::string& gpu_name) {
  return {preset("llama-3-8b"), CostModel::for_hardware(gpu(gpu_name), 0.002),
          StepDtypes{DType::BF16, DType::BF16, DType::BF16}};
}

SimulatedModel llama_on_h100() { return llama_on("H100 SXM"); }

FleetConfig fleet(FleetShape shape) {
  FleetConfig f;
  f.shape = shape;
  for (EngineConfig* e : {&f.colocated, &f.prefill, &f.decode}) {
    e->scheduler = {SchedulingPolicy::CONTINUOUS, 64, 8192, true, 0};
    e->kv_cache_memory = std::size_t{16} << 30;
    e->log = [](const std::string&) {};
  }
  f.link_bytes_per_second = 25e9;  // InfiniBand HDR
  f.kv_bytes_per_token = kv_bytes_per_token(preset("llama-3-8b"), 2);
  return f;
}

WorkloadRequest request(double arrival, int prompt_len, int max_tokens) {
  return {arrival, std::vector<std::int32_t>(static_cast<std::size_t>(prompt_len), 1), max_tokens};
}

TEST_CASE("1P1D: prefill, then the KV over the link, then decode steps, each as the cost model says", "[disagg]") {
  const SimulatedModel sim = llama_on_h100();
  const FleetRun run = simulate_fleet(sim, fleet({1, 1}), {request(0.5, 2048, 3)});
  const double prefill = sim.cost.predict(step_work(sim.config, sim.dtypes, {{0, 2048}}, 1));
  const double transfer = 268435456.0 / 25e9;  // Llama-3-8B's 2,048-token KV over HDR: 10.7 ms
  const double decode1 = sim.cost.predict(step_work(sim.config, sim.dtypes, {{2048, 1}}, 1));
  const double decode2 = sim.cost.predict(step_work(sim.config, sim.dtypes, {{2049, 1}}, 1));
  REQUIRE(run.times.size() == 1);
  const RequestTimes& t = run.times[0];
  CHECK(t.arrival == 0.5);
  REQUIRE(t.token_times.size() == 3);
  CHECK(t.token_times[0] == Approx(0.5 + prefill + transfer));  // the first token comes with the KV
  CHECK(t.token_times[2] == Approx(0.5 + prefill + transfer + decode1 + decode2));
  CHECK(t.finished == Approx(t.token_times[2]));
  REQUIRE(run.transfer_seconds.size() == 1);
  CHECK(run.transfer_seconds[0] == Approx(transfer));
}

TEST_CASE("a prefill instance's transfers queue on its one link", "[disagg]") {
  const SimulatedModel sim = llama_on_h100();
  FleetConfig f = fleet({1, 1});
  f.link_bytes_per_second = 1e9;  // slow enough that the second KV waits for the first
  const FleetRun run = simulate_fleet(sim, f, {request(0, 1024, 2), request(0, 1024, 2)});
  const double one = 1024 * f.kv_bytes_per_token / 1e9;
  // Both prompts were prefilled in one step: the second transfer starts when the first ends.
  CHECK(run.transfer_seconds[0] == Approx(one));
  CHECK(run.transfer_seconds[1] == Approx(2 * one));
}

// The times a plain simulated engine gives requests @p picked of @p w, all there at t = 0.
std::vector<RequestTimes> plain(const SimulatedModel& sim, const EngineConfig& config,
                                const std::vector<WorkloadRequest>& w, const std::vector<std::size_t>& picked) {
  Engine engine(sim, config);
  for (std::size_t i : picked) engine.add_request(w[i].prompt_ids, {}, w[i].max_tokens, {}, 0);
  while (engine.has_unfinished_requests()) engine.step();
  std::vector<RequestTimes> out;
  for (const Request* r : engine.requests()) out.push_back(r->times);
  return out;
}

TEST_CASE("colocated xN is N simulated engines, requests dealt round robin", "[disagg]") {
  const SimulatedModel sim = llama_on_h100();
  std::vector<WorkloadRequest> w;
  for (int i = 0; i < 6; ++i) w.push_back(request(0, 100 + 50 * i, 4));
  const FleetConfig f = fleet({0, 2});
  const FleetRun two = simulate_fleet(sim, f, w);
  CHECK(two.transfer_seconds.empty());
  const std::vector<RequestTimes> even = plain(sim, f.colocated, w, {0, 2, 4}),
                                  odd = plain(sim, f.colocated, w, {1, 3, 5});
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(two.times[2 * k].token_times == even[k].token_times);
    CHECK(two.times[2 * k + 1].token_times == odd[k].token_times);
  }
}

TEST_CASE("a request of one token is done at prefill, and more prefill instances shorten the queue", "[disagg]") {
  const SimulatedModel sim = llama_on_h100();
  std::vector<WorkloadRequest> w;
  for (int i = 0; i < 8; ++i) w.push_back(request(0, 4096, i == 0 ? 1 : 8));
  const FleetRun one = simulate_fleet(sim, fleet({1, 1}), w), three = simulate_fleet(sim, fleet({3, 1}), w);
  REQUIRE(one.times[0].token_times.size() == 1);
  CHECK(one.times[0].finished == Approx(one.times[0].token_times[0]));
  double last_one = 0, last_three = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    last_one = std::max(last_one, one.times[i].token_times[0]);
    last_three = std::max(last_three, three.times[i].token_times[0]);
  }
  CHECK(last_three < last_one);
}

TEST_CASE("a heterogeneous 1P1D: the prefill GPU sets the first token, the decode GPU the gaps after it", "[disagg]") {
  const SimulatedModel a100 = llama_on("A100 80GB SXM"), h100 = llama_on_h100();
  const std::vector<WorkloadRequest> w = {request(0, 2048, 4)};
  const FleetConfig f = fleet({1, 1});
  const FleetRun aa = simulate_fleet(a100, a100, f, w), ha = simulate_fleet(h100, a100, f, w),
                 ah = simulate_fleet(a100, h100, f, w);
  const double transfer = 268435456.0 / 25e9;
  const double prefill_a100 = a100.cost.predict(step_work(a100.config, a100.dtypes, {{0, 2048}}, 1)),
               prefill_h100 = h100.cost.predict(step_work(h100.config, h100.dtypes, {{0, 2048}}, 1));
  const double decode_h100 = h100.cost.predict(step_work(h100.config, h100.dtypes, {{2048, 1}}, 1));
  // The first token: the prefill GPU's step and the link, whichever GPU decodes.
  CHECK(aa.times[0].token_times[0] == Approx(prefill_a100 + transfer));
  CHECK(ah.times[0].token_times[0] == Approx(prefill_a100 + transfer));
  CHECK(ha.times[0].token_times[0] == Approx(prefill_h100 + transfer));
  // The gaps after it: the decode GPU's steps, whichever GPU prefilled.
  const auto gap = [](const FleetRun& r) { return r.times[0].token_times[1] - r.times[0].token_times[0]; };
  CHECK(gap(ah) == Approx(decode_h100));
  CHECK(gap(ha) == Approx(gap(aa)));
  CHECK(gap(ah) < gap(aa));
}

TEST_CASE("simulated fleets and prefilled requests refuse what they cannot serve", "[disagg]") {
  const SimulatedModel sim = llama_on_h100();
  REQUIRE_ERROR_MENTIONS(simulate_fleet(sim, fleet({1, 0}), {request(0, 8, 2)}), "decode");
  const SimulatedModel a100 = llama_on("A100 80GB SXM");
  REQUIRE_ERROR_MENTIONS(simulate_fleet(a100, sim, fleet({0, 2}), {request(0, 8, 2)}), "one kind of GPU");
  SimulatedModel other = a100;
  other.config = preset("llama-3-70b");
  REQUIRE_ERROR_MENTIONS(simulate_fleet(other, sim, fleet({1, 1}), {request(0, 8, 2)}), "same model");
  FleetConfig f = fleet({1, 1});
  f.link_bytes_per_second = -1;
  REQUIRE_ERROR_MENTIONS(simulate_fleet(sim, f, {request(0, 8, 2)}), "link rate");
  REQUIRE_ERROR_MENTIONS(simulate_fleet(sim, fleet({0, 1}), {request(1, 8, 2), request(0, 8, 2)}), "arrival order");
  Engine engine(sim, fleet({0, 1}).decode);
  const std::vector<std::int32_t> prompt(16, 1);
  REQUIRE_ERROR_MENTIONS(engine.add_prefilled_request(prompt, {}, 1, 0, 0, 0), "at least 2 tokens");
  REQUIRE_ERROR_MENTIONS(engine.add_prefilled_request(prompt, {}, 4, -1, 0, 0), "first token");
}

}  // namespace
}  // namespace servelab::disagg
