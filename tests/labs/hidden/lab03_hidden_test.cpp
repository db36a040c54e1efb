// SPDX-License-Identifier: MIT
// Hidden lab 03 tests: the counters on a step of decodes only, and a roof tie.
#include "model/model.h"
#include "perf/cost_model.h"
#include "perf/work.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("hidden: a batch of decodes counts what step_work says", "[lab03][hidden]") {
  auto model = Model::from_preset("tiny", 2, ModelOptions{});
  HostKVCache cache(model->config(), 2, 32);
  Batch warm;
  warm.add({0}, 0, std::vector<std::int32_t>(9, 5));
  warm.add({1}, 0, std::vector<std::int32_t>(4, 6));
  model->forward(warm, cache);
  Batch step;
  step.add({0}, 9, std::vector<std::int32_t>{7});
  step.add({1}, 4, std::vector<std::int32_t>{8});
  model->work_counter().enable(true);
  model->forward(step, cache);
  const Work formula = step_work(model->config(), {}, {{9, 1}, {4, 1}}, 2);
  CHECK(model->work_counter().total().flops == Approx(formula.flops).epsilon(1e-12));
  CHECK(model->work_counter().total().bytes() == Approx(formula.bytes()).epsilon(1e-12));
}

TEST_CASE("hidden: at the ridge both roofs take the same time", "[lab03][hidden]") {
  const CostModel m{"ridge", 10e9, 1e9, 0, false, 1.0, 1.0};
  Work w;
  w.flops = 10e9;
  w.act_read = 1e9;
  CHECK(m.predict(w) == Approx(1.0));
}
