// SPDX-License-Identifier: MIT
/**
 * @file simulated.cpp
 * @brief Lab 07's simulated tables: (d) the simulator checked against the
 *        measured serving of (c), (e) colocated against xPyD fleets at
 *        Llama-3-8B/H100 scale.
 * @see labs/07_disaggregation/README.md
 */
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "disagg/simulated_fleet.h"
#include "lab07.h"
#include "serving.h"

namespace servelab::lab07 {

using namespace servelab::lab;
using namespace servelab::disagg;

// (d) The simulator checked against (c): lab 06's cost model fitted to the colocated steps, then (c) replayed on
// simulated instances, 1P1D with the transfer rate measured in (b). Its error is what (e)'s numbers are worth.
SimulatorCheck simulator_check(const LabOptions& o, const ModelConfig& c, int threads, const RealServing& real,
                               const std::vector<Pattern>& patterns, double sm_write_bytes_per_second, const SLO& slo) {
  ThreadPool pool_colocated(2 * threads), pool_worker(threads);
  const MeasuredRoofs roofs2 = measure_roofs(pool_colocated), roofs1 = measure_roofs(pool_worker);
  const double peak2 = roofs2.peak_flops(), bandwidth2 = roofs2.bandwidth(), peak1 = roofs1.peak_flops(),
               bandwidth1 = roofs1.bandwidth();
  const StepDtypes here_dtypes{real.weight_dtype, DType::F32, DType::F32};
  const CostModel fitted = CostModel::calibrate("this CPU, " + std::to_string(2 * threads) + " threads (calibrated)",
                                                peak2, bandwidth2, real.steps);
  // A worker has fewer threads: its cost model is fitted to steps of the same workloads on a
  // model with a worker's threads, in this process (the workers' own steps stay in theirs).
  std::vector<std::pair<Work, double>> worker_steps;
  auto worker_model = load_model(
      [&] {
        LabOptions x = o;
        x.threads = threads;
        return x;
      }(),
      false);
  for (const std::vector<WorkloadRequest>& workload : real.workloads) {
    Engine engine(*worker_model, real.colocated_config);
    for (const WorkloadRequest& w : workload) engine.add_request(w.prompt_ids, {}, w.max_tokens);  // all at once
    serve_workload(engine, {}, [&](Engine&, const StepStats& s, auto) { worker_steps.push_back(timed_work(s)); });
  }
  const CostModel worker_cost = CostModel::calibrate("this CPU, " + std::to_string(threads) + " thread(s) (calibrated)",
                                                     peak1, bandwidth1, worker_steps);
  const SimulatedModel cpu_colocated{c, fitted, here_dtypes}, cpu_worker{c, worker_cost, here_dtypes};
  FleetConfig cpu_fleet;
  cpu_fleet.colocated = real.colocated_config;
  cpu_fleet.prefill.scheduler = {SchedulingPolicy::ONE_AT_A_TIME, 1, 8192, false, 0};  // the worker: one prompt, whole
  cpu_fleet.prefill.log = silent;
  cpu_fleet.decode.scheduler = {SchedulingPolicy::CONTINUOUS, 256, 8192, true, 0};  // every running request each step
  cpu_fleet.decode.log = silent;
  cpu_fleet.link_bytes_per_second = sm_write_bytes_per_second;
  cpu_fleet.transfer_overhead_s = std::max(0.0, summarize(real.control_seconds).median);
  cpu_fleet.kv_bytes_per_token = kv_bytes_per_token(c, 4);
  SimulatorCheck out;
  Table& calib = out.table;
  calib.name = "simulator_check";
  calib.title = "(d) The simulator checked against (c): the same workloads on simulated instances of this CPU";
  calib.columns = {{"pattern"},
                   {"serving"},
                   {"TTFT p50 real [ms]", 1},
                   {"TTFT p50 sim [ms]", 1},
                   {"error [%]"},
                   {"TPOT p50 real [ms]", 2},
                   {"TPOT p50 sim [ms]", 2},
                   {"error [%]"}};
  std::vector<double> abs_errors;
  for (std::size_t p = 0; p < patterns.size(); ++p)
    for (int split = 0; split < 2; ++split) {
      cpu_fleet.shape = split == 0 ? FleetShape{0, 1} : FleetShape{1, 1};
      const FleetRun run = simulate_fleet(split == 0 ? cpu_colocated : cpu_worker, cpu_fleet, real.workloads[p]);
      std::vector<const RequestTimes*> times;
      for (const RequestTimes& x : run.times) times.push_back(&x);
      const ServingMetrics m = summarize_times(times, slo), &r = real.real[p][static_cast<std::size_t>(split)];
      const double e_ttft = 100 * (m.ttft.median - r.ttft.median) / r.ttft.median,
                   e_tpot = 100 * (m.tpot.median - r.tpot.median) / r.tpot.median;
      abs_errors.insert(abs_errors.end(), {std::abs(e_ttft), std::abs(e_tpot)});
      calib.add_row({patterns[p].name, std::string(split == 0 ? "colocated" : "1P1D"), r.ttft.median * 1e3,
                     m.ttft.median * 1e3, e_ttft, r.tpot.median * 1e3, m.tpot.median * 1e3, e_tpot});
    }
  out.error = summarize(abs_errors);
  std::ostringstream n;
  n << std::fixed << std::setprecision(2) << "Cost model fitted to the " << real.steps.size()
    << " colocated steps of (c): " << fitted_formula(fitted, peak2, bandwidth2) << "; workers: fitted to "
    << worker_steps.size() << " steps of the same workloads on " << threads << " thread(s), "
    << fitted_formula(worker_cost, peak1, bandwidth1, /*units=*/false) << "; the KV moves at (b)'s sm write rate, plus "
    << cpu_fleet.transfer_overhead_s * 1e3
    << " ms of control messages per request (the median over the warm-up requests of (c)). Calibration error (|error| "
       "over these rows): "
    << std::setprecision(0) << out.error.median << "% median, " << out.error.max << "% max.";
  calib.note = n.str();
  return out;
}

// (e) Seed 001's question at its scale, simulated: colocated against xPyD on the same number of GPUs, each
// fleet's latencies at a fixed load and its goodput per GPU (DistServe's), so the split that pays shows per pattern.
Fleets simulated_fleets(const LabOptions& o, const Flags& f, const Link& gpu_link, const Summary& calibration_error) {
  const SimulatedGpu instance = simulated_gpu(f.sim_model, f.sim_gpu, f.sim_overhead_ms, "--sim-model");
  const Hardware& hw = *instance.hardware;
  const SimulatedModel& gpu_sim = instance.model;
  const ModelConfig& g = gpu_sim.config;
  FleetConfig fleet;
  fleet.colocated.scheduler = {SchedulingPolicy::CONTINUOUS, 256, f.sim_budget, true, 0};
  fleet.prefill.scheduler = {SchedulingPolicy::CONTINUOUS, 256, 8192, true,
                             0};  // prefill throughput (the prefill/decode article: 8,192+)
  fleet.decode.scheduler = {SchedulingPolicy::CONTINUOUS, 256, 8192, true, 0};
  for (EngineConfig* e : {&fleet.colocated, &fleet.prefill, &fleet.decode}) {
    e->kv_cache_memory = instance.kv_cache_memory;
    e->log = silent;
  }
  fleet.link_bytes_per_second = gpu_link.bytes_per_second;
  fleet.kv_bytes_per_token = kv_bytes_per_token(g, 2);
  // Seed 001's thresholds: short prompts < 512 tokens, long > 2K; long outputs > 512.
  const std::vector<Pattern> gpu_patterns = {
      {"short prompt, short output", "continuous batching", LengthDist::uniform(128, 512), LengthDist::uniform(16, 64)},
      {"short prompt, long output", "chunked prefill", LengthDist::uniform(128, 512), LengthDist::uniform(512, 1024)},
      {"long prompt, short output", "disaggregated, more prefill", LengthDist::uniform(2048, 4096),
       LengthDist::uniform(16, 64)},
      {"long prompt, long output", "disaggregated, even split", LengthDist::uniform(2048, 4096),
       LengthDist::uniform(512, 1024)},
  };
  const std::vector<FleetShape> shapes = {{0, 2}, {1, 1}, {0, 3}, {2, 1}, {1, 2}, {0, 4}, {3, 1}};
  const SLO gpu_slo{f.sim_slo_ttft_ms / 1e3, f.sim_slo_tpot_ms / 1e3};
  Fleets out;
  Table& sim = out.table;
  sim.name = "simulated_fleets";
  sim.title = "(e) Simulated: " + g.name + " (bf16), one " + hw.name + " per instance, KV over " + gpu_link.name +
              ", colocated vs xPyD";
  sim.columns = {
      {"pattern"},          {"seed 001 suggests"},       {"fleet (simulated)"}, {"GPUs"},
      {"req/s offered", 2}, {"TTFT p50 [ms]", 1},        {"TTFT p99 [ms]", 1},  {"TPOT p50 [ms]", 2},
      {"TPOT p99 [ms]", 2}, {"KV transfer p50 [ms]", 2}, {"met SLO [%]"},       {"goodput per GPU [req/s]", 3}};
  const auto metrics = [&](const FleetRun& run) {
    std::vector<const RequestTimes*> view;
    for (const RequestTimes& x : run.times) view.push_back(&x);
    return summarize_times(view, gpu_slo);
  };
  Progress sim_bar("simulated fleets", static_cast<long>(gpu_patterns.size() * shapes.size()));
  for (const Pattern& pattern : gpu_patterns) {
    WorkloadSpec spec;
    spec.prompt_len = pattern.prompt;
    spec.output_len = pattern.output;
    spec.seed = o.seed;
    // Serves @p shape with @p requests_per_gpu requests per GPU arriving as @p arrivals says.
    const auto serve = [&](const FleetShape& shape, int requests_per_gpu, const std::string& arrivals) {
      spec.num_requests = requests_per_gpu * shape.num_instances();
      spec.arrivals = parse_arrivals(arrivals, "--sim-load");
      fleet.shape = shape;
      return simulate_fleet(gpu_sim, fleet, make_workload(spec, g.vocab_size));
    };
    // Serves @p shape at @p per_gpu_rate requests/s per GPU, sim_requests per GPU.
    const auto serve_at = [&](const FleetShape& shape, double per_gpu_rate) {
      return serve(shape, f.sim_requests, "poisson:" + std::to_string(per_gpu_rate * shape.num_instances()));
    };
    // The load: a fraction of what one colocated GPU serves when every request is there at once.
    const double saturation = metrics(serve({0, 1}, f.sim_requests, "all")).requests_per_second;
    double best = -1;
    std::string best_shape;
    for (const FleetShape& shape : shapes) {
      const FleetRun run = serve_at(shape, f.sim_load * saturation);
      const ServingMetrics m = metrics(run);
      // DistServe's goodput: the highest rate per GPU at which 90% of requests meet the SLO, by bisection
      // below what this fleet serves with every request there at once (no higher rate is sustainable,
      // however short a run hides its queue).
      double lo = 0, hi = metrics(serve(shape, f.sim_requests, "all")).requests_per_second / shape.num_instances();
      for (int i = 0; i < (o.quick ? 5 : 10); ++i) {  // --quick: within 3% of the saturation rate
        const double mid = (lo + hi) / 2;
        const ServingMetrics at = metrics(serve_at(shape, mid));
        (at.num_meeting_slo >= 0.9 * at.num_requests ? lo : hi) = mid;
      }
      const Cell transfer =
          run.transfer_seconds.empty() ? Cell{std::string("—")} : Cell{summarize(run.transfer_seconds).median * 1e3};
      sim.add_row({pattern.name, pattern.seed_says, shape.describe(), static_cast<long long>(shape.num_instances()),
                   f.sim_load * saturation * shape.num_instances(), m.ttft.median * 1e3, m.ttft.p99 * 1e3,
                   m.tpot.median * 1e3, m.tpot.p99 * 1e3, transfer, 100.0 * m.num_meeting_slo / m.num_requests, lo});
      if (lo > best) best = lo, best_shape = shape.describe();
      sim_bar.advance();
    }
    out.winners.push_back(pattern.name + ": " + best_shape);
  }
  std::ostringstream n;
  n << "Simulated, never measured: the engine's scheduler on " << gpu_sim.cost.label << " roofs plus "
    << f.sim_overhead_ms << " ms per step, calibrated on this CPU to " << std::fixed << std::setprecision(0)
    << calibration_error.median << "% median error (table d). Each fleet gets " << f.sim_requests
    << " requests per GPU, routed round robin; the latency columns at " << f.sim_load * 100
    << "% of one colocated GPU's saturation rate per GPU. SLO: TTFT <= " << f.sim_slo_ttft_ms
    << " ms, TPOT <= " << f.sim_slo_tpot_ms
    << " ms; goodput per GPU is DistServe's: the highest Poisson rate per GPU at which 90% of "
    << "requests meet both (bisection). Colocated: chunked prefill, budget " << f.sim_budget
    << "; prefill instances: budget 8192. Best goodput per GPU: ";
  for (std::size_t i = 0; i < out.winners.size(); ++i) n << (i ? "; " : "") << out.winners[i];
  n << ".";
  sim.note = n.str();
  return out;
}

}  // namespace servelab::lab07
