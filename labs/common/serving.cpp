// SPDX-License-Identifier: MIT
/**
 * @file serving.cpp
 * @brief The serving labs' shared steps (serving.h).
 */
#include "serving.h"

#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "core/hash.h"
#include "core/stats.h"
#include "perf/machine.h"
#include "trace.h"

namespace servelab::lab {

std::vector<std::int32_t> ServedRun::all_tokens() const {
  std::vector<std::int32_t> all;
  for (const auto& t : tokens) all.insert(all.end(), t.begin(), t.end());
  return all;
}

std::string ServedRun::tokens_hash() const { return token_hash(all_tokens()); }

std::vector<std::vector<std::int32_t>> output_tokens(const std::vector<const Request*>& requests) {
  std::vector<std::vector<std::int32_t>> out;
  out.reserve(requests.size());
  for (const Request* r : requests) out.emplace_back(r->output_token_ids().begin(), r->output_token_ids().end());
  return out;
}

ServedRun serve_workload(Engine& engine, const std::vector<WorkloadRequest>& workload, const StepCallback& on_step) {
  ServedRun run;
  const TraceScope trace(engine);
  replay(engine, workload, {.on_step = [&](Engine& e, const StepStats& s, std::span<const RequestOutput> outputs) {
           run.steps.push_back(s);
           if (on_step) on_step(e, s, outputs);
         }});
  run.requests = engine.requests();
  run.tokens = output_tokens(run.requests);
  return run;
}

std::pair<Work, double> timed_work(const StepStats& step) {
  return {step.work, step.forward_seconds + step.schedule_seconds};
}

Rungs compare_rungs(Report& report, int lab, const LabConfig& base, const std::string& previous_run,
                    const std::string& current_run) {
  check(lab >= 2 && lab <= 7, "compare_rungs: lab must be 2..7, got ", lab);
  Rungs rungs{.previous = configure(Techniques::for_lab(lab - 1), base),
              .current = configure(Techniques::for_lab(lab), base)};
  record_configuration(report, previous_run, lab - 1, base, rungs.previous);
  record_configuration(report, current_run, lab, base, rungs.current);
  return rungs;
}

double MeasuredRoofs::peak_flops() const { return summarize(flops.samples).max * 1e9; }
double MeasuredRoofs::bandwidth() const { return summarize(read.samples).max * 1e9; }

MeasuredRoofs measure_roofs(ThreadPool& pool, int repeats) {
  MeasuredRoofs roofs;
  for (int i = 0; i < repeats; ++i) {  // best of the repeats: roofs are the most the machine can do
    roofs.flops.samples.push_back(measure_peak_gflops(pool, PeakOp::F32Fma));  // the engine's FMA roof (lab 03)
    roofs.read.samples.push_back(measure_read_gbs(pool));
  }
  return roofs;
}

std::string fitted_formula(const CostModel& model, double peak_flops, double bandwidth, bool units) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << "max(FLOPs / (" << peak_flops / 1e9 << (units ? " GFLOP/s" : "") << " x "
     << model.compute_efficiency << "), bytes / (" << bandwidth / 1e9 << (units ? " GB/s" : "") << " x "
     << model.memory_efficiency << ")) + " << model.overhead_s * 1e3 << " ms";
  return os.str();
}

SimulatedGpu simulated_gpu(const std::string& model_preset, const std::string& gpu_name, double overhead_ms,
                           const std::string& model_flag) {
  const Hardware& hw = gpu(gpu_name);
  SimulatedGpu out{.model = {preset(model_preset), CostModel::for_hardware(hw, overhead_ms / 1e3),
                             StepDtypes{DType::BF16, DType::BF16, DType::BF16}},
                   .hardware = &hw};
  const double kv = 0.9 * hw.memory_gb * 1e9 - 2.0 * static_cast<double>(out.model.config.num_parameters());
  check(kv > 0, model_flag, " ", model_preset, " does not fit ", gpu_name, " in bf16");
  out.kv_cache_memory = static_cast<std::size_t>(kv);
  return out;
}

}  // namespace servelab::lab
