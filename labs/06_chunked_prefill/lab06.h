// SPDX-License-Identifier: MIT
/**
 * @file lab06.h
 * @brief Lab 06's tables, one function each: 1-3 serve on this machine
 *        (measured.cpp), 4-7 run the same experiments on the simulator at GPU
 *        scale (simulated.cpp); main.cpp parses the flags and prints the verdict.
 * @see labs/06_chunked_prefill/README.md
 */
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lab.h"
#include "serve/engine.h"
#include "serve/ladder.h"
#include "serve/metrics.h"
#include "serve/replay.h"
#include "workload/workload.h"
#include "serving.h"

namespace servelab::lab06 {

using namespace servelab::lab;

/// Lab 06's own flags, with their defaults (--quick shrinks those not given).
struct Flags {
  int decoders = 8, decode_len = 160, long_prompt = 2048, join_step = 24, num_long = 4, long_every = 32,
      block_size = 16;
  std::vector<int> budgets = {256, 512};
  std::vector<int> sweep = {512, 1024, 2048, 4096, 8192};
  int num_requests = 16;
  std::string prompt_dist = "lognormal:300:1:16:3000", output_dist = "lognormal:48:0.8:4:256", arrivals = "poisson:1.5";
  double slo_ttft_ms = 3000, slo_tpot_ms = 100;
  std::string gpu_model = "llama-3-8b", gpu_name = "H100 SXM";
  int gpu_requests = 2000, sim_speed_requests = 10000;
  double gpu_rate = 32, gpu_overhead_ms = 4, gpu_slo_ttft_ms = 1000, gpu_slo_tpot_ms = 15;
};

inline std::string budget_name(bool chunked, int budget) {
  return chunked ? "chunked, budget " + std::to_string(budget) : "no chunking";
}

/// The budget is part of the base: each run's rung is configure() over its own budget's base.
inline LabConfig with_budget(LabConfig at, int budget) {
  at.engine.scheduler.max_num_batched_tokens = budget;
  return at;
}

/// Lab 05's rung without chunks (a whole prompt must fit the budget), lab 06's with them.
inline LabConfig lab_config(bool chunked, const LabConfig& at, int budget) {
  return configure(Techniques::for_lab(chunked ? 6 : 5), with_budget(at, budget));
}

/// Replays @p requests on a simulated engine; all arrive at their workload times.
inline ServingMetrics simulate_serving(const SimulatedModel& sim, const EngineConfig& config,
                                       const std::vector<WorkloadRequest>& requests, const SLO& slo) {
  Engine engine(sim, config);
  replay(engine, requests);
  return summarize_requests(engine.requests(), slo);
}

/// The measured steps a cost model is fitted to and checked on: (step work, measured seconds).
struct StepSamples {
  std::vector<std::pair<Work, double>> train{}, held_out{};
};

/// Tables 1 (printed) and its step times (plotted).
struct HeadOfLine {
  Table table{}, steps{};
};

/// 1. Head-of-line blocking: steady decodes, and a long prompt every few steps, without chunks and with each
///    budget. One stall hits one of a decoder's ~160 token intervals, below what a p99 sees; a stream of long
///    prompts is what a server meets. Shows the stall chunking removes, with the same tokens.
HeadOfLine head_of_line(Report& report, Model& model, const LabConfig& base, const Flags& f, Progress& bar,
                        StepSamples& samples);

/// 2. The budget sweep on a mixed workload, chunked: what each max_num_batched_tokens trades between TTFT
///    and TPOT. Returns the table and each budget's metrics, for the calibration table.
Table budget_sweep(Model& model, const LabConfig& base, const std::vector<WorkloadRequest>& workload,
                   const std::vector<int>& sweep, const SLO& slo, Progress& bar, StepSamples& samples,
                   std::vector<ServingMetrics>& real_sweep);

/// 3. The cost model, fitted to the head-of-line steps and the sweep's first budgets, checked on the other
///    budgets (held out): how far the simulator that the GPU tables use is from this machine.
Table calibration(const Model& model, const LabConfig& base, const std::vector<WorkloadRequest>& workload,
                  const std::vector<int>& sweep, const SLO& slo, const StepSamples& samples,
                  const std::vector<ServingMetrics>& real_sweep);

/// The same experiments at GPU scale: simulated, never measured. The rungs over a GPU's base (blocks of 16,
/// its KV memory), the GPU workload, and its SLO.
struct GpuScale {
  SimulatedGpu gpu;
  WorkloadSpec spec;  ///< the sweep's lengths, --gpu-requests at --gpu-rate
  LabConfig base{};
  SLO slo{};          ///< the GPU's p99 limits (--gpu-slo-*): what capacity is measured against
  SLO goodput_slo{};  ///< the sweep's SLO (--slo-*): what the goodput columns count

  EngineConfig config(bool chunked, int budget) const { return lab_config(chunked, base, budget).engine; }
  // Simulates config(chunked, budget) on @p requests.
  ServingMetrics simulate(const EngineConfig& e, const std::vector<WorkloadRequest>& requests) const {
    return simulate_serving(gpu.model, e, requests, goodput_slo);
  }
  // The GPU workload with Poisson arrivals at @p rate requests/s.
  ServingMetrics at_rate(const EngineConfig& e, double rate) const {
    WorkloadSpec r = spec;
    r.arrivals = parse_arrivals("poisson:" + plain_number(rate), "--gpu-rate");
    return simulate(e, make_workload(r, gpu.model.config.vocab_size));
  }
  // Both p99s within the SLO at @p rate.
  bool meets(const EngineConfig& e, double rate) const {
    const ServingMetrics m = at_rate(e, rate);
    return m.ttft.p99 <= slo.ttft && m.tpot.p99 <= slo.tpot;
  }
};

/// The GPU scale of @p f over the sweep's workload @p spec.
GpuScale gpu_scale(const Flags& f, const WorkloadSpec& spec);

/// 4. The GPU workload served by each configuration: latencies and goodput at one rate.
Table gpu_simulated(const GpuScale& g, const Flags& f);

/// Table 5 and the best chunked budget it found.
struct Capacity {
  Table table{};
  double best = 0;      ///< the best chunked capacity, req/s
  int best_budget = 0;  ///< its budget
};

/// 5. Capacity: the highest Poisson rate whose p99 TTFT and TPOT meet the GPU SLO, by bisection (as Sarathi-Serve
///    and Vidur find it): the number chunked prefill is judged by.
Capacity capacity(const GpuScale& g, const Flags& f);

/// Table 6 (printed) and its plot table (one column per line drawn).
struct RateSweep {
  Table table{}, plot{};
};

/// 6. The rate sweep behind the capacities: p99 latencies against achieved throughput, with the SLO lines,
///    for no chunking and the best budget.
RateSweep rate_sweep(const GpuScale& g, const Flags& f, const Capacity& cap);

/// 7. The simulator must not be what limits a sweep: one large sweep point, timed.
Table simulator_speed(const GpuScale& g, const Flags& f, int best_budget);

}  // namespace servelab::lab06
