// SPDX-License-Identifier: MIT
/**
 * @file lab06.h
 * @brief Lab 06's tables, one function each: 0-3 serve on this machine
 *        (measured.cpp), 4-8 run the same experiments on the simulator at GPU
 *        scale (simulated.cpp); main.cpp parses the flags and checks the claims.
 *        Every table speaks latency.h's vocabulary.
 * @see labs/06_chunked_prefill/README.md
 */
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lab.h"
#include "serve/engine.h"
#include "serve/ladder.h"
#include "serve/metrics.h"
#include "serve/replay.h"
#include "workload/workload.h"
#include "latency.h"
#include "serving.h"

namespace servelab::lab06 {

using namespace servelab::lab;

/// Lab 06's own flags, with their defaults (--quick shrinks the measured ones not given; the simulated
/// part is cheap and keeps its sizes, so its tables read the same in a quick run).
struct Flags {
  int decoders = 8, decode_len = 160, long_prompt = 2048, join_step = 24, num_long = 4, long_every = 32,
      block_size = 16;
  int long_prefill_threshold = 0;  ///< --long-prefill-token-threshold: most tokens of one request per step
  std::vector<int> budgets = {256, 512};
  std::vector<int> sweep = {512, 1024, 2048, 4096, 8192};
  int num_requests = 16;
  std::string prompt_dist = "lognormal:300:1:16:3000", output_dist = "lognormal:48:0.8:4:256", arrivals = "poisson:1.5";
  double slo_ttft_ms = 3000, slo_tbt_ms = 100;
  std::string gpu_model = "llama-3-8b", gpu_name = "H100 SXM";
  std::vector<int> gpu_sweep = {512, 1024, 2048, 4096, 8192};
  std::string gpu_prompt_dist = "lognormal:1024:1:32:7936", gpu_output_dist = "lognormal:128:0.8:8:256";
  int gpu_requests = 2000, sim_speed_requests = 10000;
  double gpu_rate = 8, gpu_overhead_ms = 4, gpu_slo_ttft_ms = 1000, gpu_slo_tbt_ms = 15;
  double strict_slo_ttft_ms = 50;  ///< the tens-of-ms TTFT limit of the "not enough" table
  int long_context_prompt = 8000;  ///< the past-8K prompt of the "not enough" table
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

/// Replays @p requests on a simulated engine (all arrive at their workload times), judged by @p slo.
inline RunLatency simulate_serving(const SimulatedModel& sim, const EngineConfig& config,
                                   const std::vector<WorkloadRequest>& requests, const LatencySLO& slo) {
  Engine engine(sim, config);
  const TraceScope trace(engine);
  replay(engine, requests);
  return run_latency(engine.requests(), slo);
}

/// The columns every serving table of the lab shares after its first (@p first): TTFT, ITL p99 beside
/// TPOT p99, throughput, and goodput and meets-SLO in both readings of the table's one SLO.
std::vector<Column> latency_columns(const std::string& first);
/// One row under latency_columns(): @p first, then @p run's numbers.
std::vector<Cell> latency_row(Cell first, const RunLatency& run);
/// The sentence every such table's note starts with: which metric is which, and how goodput counts.
std::string latency_note();

/// The measured steps a cost model is fitted to and checked on: (step work, measured seconds).
struct StepSamples {
  std::vector<std::pair<Work, double>> train{}, held_out{};
};

/// A step's cost as a straight line in its tokens, fitted by least squares: seconds = fixed + per_token * tokens.
struct StepCostLine {
  double fixed = 0;      ///< seconds a step costs whatever it carries (weights read, launches, overhead)
  double per_token = 0;  ///< seconds each scheduled token adds
  /// The fixed part's share of a step of @p tokens.
  double fixed_share(int tokens) const { return fixed / (fixed + per_token * tokens); }
};

/// Fits StepCostLine to (scheduled tokens, seconds) of @p steps by least squares with fixed >= 0;
/// @throws Error with fewer than 2 distinct sizes.
StepCostLine fit_step_cost(const std::vector<std::pair<int, double>>& steps);

/// Table 0: the KV cache article's 1,000-token prompt split by this engine's scheduler.
struct ArticleSplit {
  Table table{};
  std::vector<int> chunks{};  ///< the long prompt's tokens computed in each step, in order
};

struct GpuScale;

/// 0. The KV cache article's walk-through on this engine's scheduler: a 1,000-token prompt beside 4 decodes
///    with a budget of 512 and 256-token chunks, on @p g's simulated clock (the scheduling of a real run).
ArticleSplit article_split(Report& report, const GpuScale& g);

/// Tables 1 (printed) and its step times (plotted), and the long prompts' K/V compared across configurations.
struct HeadOfLine {
  Table table{}, steps{};
  bool kv_equal = false;     ///< every configuration left the long prompts the K/V bytes of no chunking
  std::size_t kv_bytes = 0;  ///< the bytes compared per configuration
};

/// 1. Head-of-line blocking: steady decodes, and a long prompt every few steps, without chunks and with each
///    budget. One stall hits one of a decoder's ~160 token intervals, below what a p99 sees; a stream of long
///    prompts is what a server meets. Shows the stall chunking removes, with the same tokens.
HeadOfLine head_of_line(Report& report, Model& model, const LabConfig& base, const Flags& f, Progress& bar,
                        StepSamples& samples);

/// Table 2 and what the calibration and the verdict read from it.
struct BudgetSweep {
  Table table{};
  std::vector<RunLatency> runs{};               ///< [budget] the real runs' latencies
  std::vector<std::pair<int, double>> steps{};  ///< every step of every budget: (scheduled tokens, seconds)
};

/// 2. The budget sweep on a mixed workload, chunked: what each max_num_batched_tokens trades between TTFT
///    and the token gaps, judged by @p slo.
BudgetSweep budget_sweep(Model& model, const LabConfig& base, const std::vector<WorkloadRequest>& workload,
                         const std::vector<int>& sweep, const LatencySLO& slo, Progress& bar, StepSamples& samples);

/// 3. The cost model, fitted to the head-of-line steps and the sweep's first budgets, checked on the other
///    budgets (held out): how far the simulator that the GPU tables use is from this machine.
Table calibration(const Model& model, const LabConfig& base, const std::vector<WorkloadRequest>& workload,
                  const std::vector<int>& sweep, const LatencySLO& slo, const StepSamples& samples,
                  const BudgetSweep& real);

/// The same experiments at GPU scale: simulated, never measured. The rungs over a GPU's base (blocks of 16,
/// its KV memory), the GPU workload, and the one SLO every simulated table judges by.
struct GpuScale {
  SimulatedGpu gpu{};
  WorkloadSpec spec{};  ///< --gpu-prompt-len-dist and --gpu-output-len-dist, --gpu-requests at --gpu-rate
  LabConfig base{};
  LatencySLO slo{};  ///< --gpu-slo-*: what meets-SLO, capacity and goodput all use

  /// "llama-3-8b (bf16) on H100 SXM (simulated)": what every simulated table names.
  std::string what() const { return gpu.model.config.name + " (bf16) on " + gpu.hardware->name + ", simulated"; }
  EngineConfig config(bool chunked, int budget) const { return lab_config(chunked, base, budget).engine; }
  /// Simulates @p e on @p requests, judged by @p by.
  RunLatency simulate(const EngineConfig& e, const std::vector<WorkloadRequest>& requests, const LatencySLO& by) const {
    return simulate_serving(gpu.model, e, requests, by);
  }
  /// @p workload with Poisson arrivals at @p rate requests/s, simulated on @p e and judged by @p by.
  RunLatency at_rate(const EngineConfig& e, const WorkloadSpec& workload, double rate, const LatencySLO& by) const {
    WorkloadSpec r = workload;
    r.arrivals = parse_arrivals("poisson:" + plain_number(rate), "--gpu-rate");
    return simulate(e, make_workload(r, gpu.model.config.vocab_size), by);
  }
};

/// The GPU scale of @p f (its model, GPU, workload and SLO).
GpuScale gpu_scale(const Flags& f, std::uint64_t seed);

/// No chunking (a budget every prompt fits), then each budget of --gpu-sweep, chunked.
std::vector<std::pair<bool, int>> gpu_configs(const std::vector<int>& sweep);

/// 4. The GPU workload served by each configuration at one rate, both readings of the SLO side by side.
Table gpu_simulated(const GpuScale& g, const Flags& f);

/// One configuration's capacities, req/s: the highest Poisson rates at which it meets the SLO in each reading.
struct Capacities {
  double itl = 0;   ///< TTFT p99 and ITL p99 within the SLO (Sarathi-Serve)
  double tpot = 0;  ///< TTFT p99 and TPOT p99 within the SLO (vLLM's TPOT); 0 unless asked for
};

/// Capacities of @p e on @p spec under @p slo, by bisection below the saturation throughput, to 1/256 of it
/// (0 when even that rate fails); the TPOT reading only when @p with_tpot.
Capacities capacity_of(const GpuScale& g, EngineConfig e, const WorkloadSpec& spec, const LatencySLO& slo,
                       bool with_tpot);

/// Table 5 and the best chunked budget it found.
struct Capacity {
  Table table{};
  double plain = 0;     ///< no chunking's capacity (ITL reading), req/s
  double best = 0;      ///< the best chunked capacity (ITL reading), req/s
  int best_budget = 0;  ///< its budget
};

/// 5. Capacity in both readings of the one GPU SLO, by bisection (as Sarathi-Serve and Vidur find it).
Capacity capacity(const GpuScale& g, const Flags& f);

/// Table 6 (printed) and its plot table (one column per line drawn).
struct RateSweep {
  Table table{}, plot{};
};

/// 6. The rate sweep behind the capacities: p99 latencies, goodput and meets-SLO against achieved throughput,
///    for no chunking and the best budget.
RateSweep rate_sweep(const GpuScale& g, const Flags& f, const Capacity& cap);

/// Table 7 and the numbers its claim reads.
struct NotEnough {
  Table table{};
  double long_prompt_best = 0;  ///< chunked capacity (the best budget above) with the past-8K prompts, req/s
  double strict_best = 0;       ///< chunked capacity (the best budget above) under the tens-of-ms SLO, req/s
  double lone_prefill_s = 0;    ///< one past-8K prompt's prefill alone, chunked at the smallest budget, seconds
};

/// 7. Where chunking is not enough (the prefill/decode article): prompts past 8K tokens, and a tens-of-ms
///    TTFT limit beside the token-gap one; capacity without chunks and at @p reference's best budget under each.
NotEnough not_enough(const GpuScale& g, const Flags& f, const Capacity& reference);

/// Seconds to the first token of one @p prompt_len-token prompt served alone on @p g (no queue, no neighbours).
double lone_prefill(const GpuScale& g, int prompt_len, bool chunked, int budget);

/// The simulated step cost line of @p g at budget @p budget on its workload, for the CPU comparison.
StepCostLine simulated_step_cost(const GpuScale& g, int budget);

/// 8. The simulator must not be what limits a sweep: one large sweep point, timed.
Table simulator_speed(const GpuScale& g, const Flags& f, int best_budget);

/// Lab 06's flags on @p app, over the defaults in @p f (flags.cpp).
void add_flags(CLI::App& app, Flags& f);

/// --quick: smaller sizes for every measured flag not given on @p app (and fewer simulated requests).
void quick_sizes(const CLI::App& app, Flags& f);

/// Refuses a flag out of range, naming it, before anything runs.
void check_flags(const Flags& f);

/// The chapter's claims, each decided on this run's numbers (the tables above), recorded on @p report,
/// then the one-line verdict (claims.cpp).
void check_claims(Report& report, const Flags& f, const GpuScale& g, const ArticleSplit& split, const HeadOfLine& head,
                  const BudgetSweep& sweep, const Table& gpu_table, const Capacity& cap, const NotEnough& limits);

}  // namespace servelab::lab06
