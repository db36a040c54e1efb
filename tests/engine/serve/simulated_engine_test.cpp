// SPDX-License-Identifier: MIT
// The engine on a simulated clock: the same scheduler, no model. Its clock
// moves by exactly the cost model's prediction for each step, and it makes
// exactly the scheduling decisions the real engine makes for the same lengths.
#include "core/error.h"
#include "core/random.h"
#include "model/model.h"
#include "serve/engine.h"
#include "test_util.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;

namespace {

SimulatedModel simulated(const std::string& preset_name, const std::string& hardware) {
  return {preset(preset_name), CostModel::for_hardware(gpu(hardware), 0.002),
          StepDtypes{DType::BF16, DType::BF16, DType::BF16}};
}

}  // namespace

TEST_CASE("a simulated engine's clock advances by the cost model's prediction of each step", "[engine][simulated]") {
  const SimulatedModel sim = simulated("llama-3-8b", "H100 SXM");
  EngineConfig config;
  config.scheduler = {.max_num_seqs = 8, .max_num_batched_tokens = 4096};
  config.kv_cache_memory = std::size_t{8} << 30;
  Engine engine(sim, config);
  CHECK(engine.simulated());
  const std::vector<std::int32_t> prompt(1000, 0);
  const int id = engine.add_request(prompt, SamplingParams{}, 3);
  while (engine.has_unfinished_requests()) engine.step();
  const double prefill = sim.cost.predict(step_work(sim.config, sim.dtypes, {{0, 1000}}, 1));
  const double decode1 = sim.cost.predict(step_work(sim.config, sim.dtypes, {{1000, 1}}, 1));
  const double decode2 = sim.cost.predict(step_work(sim.config, sim.dtypes, {{1001, 1}}, 1));
  const RequestTimes& t = engine.request(id).times;
  REQUIRE(t.token_times.size() == 3);
  CHECK(t.token_times[0] == Approx(prefill));
  CHECK(t.token_times[2] == Approx(prefill + decode1 + decode2));
  CHECK(engine.now() == Approx(prefill + decode1 + decode2));
  CHECK(prefill > decode1);  // a 1000-token prefill of an 8B model is compute-bound, a decode is not
  REQUIRE_ERROR_MENTIONS(engine.kv_cache(), "simulated engine has no KV storage");
}

TEST_CASE("the simulated engine schedules exactly as the real engine for the same lengths", "[engine][simulated]") {
  ModelOptions options;
  auto model = Model::from_preset("tiny", 1, options);
  SimulatedModel sim{model->config(), CostModel::for_hardware(gpu("A100 80GB SXM"), 0.0), StepDtypes{}};
  EngineConfig config;
  config.scheduler = {.max_num_seqs = 4,
                      .max_num_batched_tokens = 64,
                      .enable_chunked_prefill = true,
                      .long_prefill_token_threshold = 24};
  config.block_size = 4;
  config.kv_cache_memory =
      kv_cache_bytes_for(model->config(), 24, 4);  // 96 tokens for 4 requests of up to 90: preemptions
  config.log = [](const std::string&) {};
  Engine real(*model, config), simulated_engine(sim, config);
  SplitMix64 rng(3);
  for (int i = 0; i < 10; ++i) {
    const auto prompt = synthetic_prompt(rng.uniform_int(1, 60), model->config().vocab_size, i);
    const int n = rng.uniform_int(1, 30);
    real.add_request(prompt, SamplingParams{}, n);
    simulated_engine.add_request(prompt, SamplingParams{}, n);
  }
  int steps = 0;
  while (real.has_unfinished_requests()) {
    REQUIRE(simulated_engine.has_unfinished_requests());
    real.step();
    simulated_engine.step();
    const StepStats &a = real.last_step(), &b = simulated_engine.last_step();
    REQUIRE(a.num_scheduled_tokens == b.num_scheduled_tokens);
    REQUIRE(a.num_scheduled_requests == b.num_scheduled_requests);
    REQUIRE(a.num_preempted == b.num_preempted);
    REQUIRE(a.num_used_blocks == b.num_used_blocks);
    ++steps;
  }
  CHECK_FALSE(simulated_engine.has_unfinished_requests());
  CHECK(real.scheduler().num_preemptions() > 0);
  CHECK(steps > 20);
}
