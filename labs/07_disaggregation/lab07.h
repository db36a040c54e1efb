// SPDX-License-Identifier: MIT
/**
 * @file lab07.h
 * @brief Lab 07's tables, one function each: (b) and (c) run real processes
 *        (measured.cpp), (d) and (e) run the simulator (simulated.cpp), (f)
 *        to (h) put the two pools on different GPUs and set the papers'
 *        numbers beside the simulator's (heterogeneous.cpp); main.cpp parses
 *        the flags, computes (a), checks the claims and prints the verdict.
 * @see labs/07_disaggregation/README.md
 */
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "core/stats.h"
#include "disagg/link.h"
#include "disagg/simulated_fleet.h"
#include "lab.h"
#include "serving.h"
#include "serve/engine.h"
#include "serve/metrics.h"
#include "workload/workload.h"

namespace servelab::lab07 {

using disagg::FleetConfig;
using disagg::FleetRun;
using disagg::Link;
using namespace servelab::lab;

/// Lab 07's own flags (the common ones are in LabOptions), with their defaults.
struct Flags {
  std::string exe{};  ///< runs the router and the workers
  int prompt_len = 512, num_requests = 12;
  int serving_repeats = 3;  ///< times table (c) serves each pattern; its cells are medians over them
  double rate = 4, slo_ttft_ms = 500, slo_tpot_ms = 50;
  std::string sim_model = "llama-3-8b", sim_gpu = "H100 SXM", sim_decode_gpu = "H200 SXM", sim_link = "ib-hdr";
  int sim_requests = 300, sim_budget = 2048;
  double sim_load = 0.7, sim_overhead_ms = 4, sim_slo_ttft_ms = 1000, sim_slo_tpot_ms = 15;
};

/// An engine log that drops its lines: the lab prints no preemption lines.
inline void silent(const std::string&) {}

/// Records @p claim, keeping its cause only when it did not hold (the cause is worded before the check decides).
inline void record_claim(Report& report, Claim claim) {
  if (claim.held) claim.cause.clear();
  report.claim(std::move(claim));
}

/// A request pattern of the prefill/decode article's strategy table, and the strategy it suggests.
struct Pattern {
  std::string name, article_says;
  LengthDist prompt, output;
};

/// Table (c)'s prompt and output lengths: the article's patterns scaled down to this machine.
struct PatternLengths {
  int s_prompt = 0, l_prompt = 0, s_out = 0, l_out = 0;
};

/// The lengths table (c) uses: shorter with --quick.
PatternLengths pattern_lengths(bool quick);
/// Table (c)'s five patterns over @p lengths.
std::vector<Pattern> patterns_of(const PatternLengths& lengths);

/// Table (b) and the rate (c)'s 1P1D moves its KV at, for the simulator check (d).
struct Transfers {
  Table table{};
  double sm_write_bytes_per_second = 0;  ///< the transport table (c)'s 1P1D uses
};

/// (b) Measured transfers between real processes: one cluster per (transport, mode, link, streaming), the same
/// prompts through each, checksums compared on both sides. Shows what a transfer costs here against a prefill.
Transfers measured_transfers(const LabOptions& o, const Flags& f, const ModelConfig& c, int threads);

/// One serving mode's numbers in table (c): medians over the repeats, with their spread.
struct RealRow {
  Summary ttft_p50{}, ttft_p99{}, tpot_p50{}, tpot_p99{};  ///< over the repeats, seconds
};

/// Table (c) and what the simulator check (d) replays and compares with.
struct RealServing {
  Table table{};
  std::vector<std::pair<Work, double>> steps{};           ///< the colocated steps: the simulator's calibration data
  std::vector<std::vector<WorkloadRequest>> workloads{};  ///< per pattern, for the simulator check
  std::vector<std::array<RealRow, 2>> real{};             ///< per pattern: colocated, 1P1D
  std::vector<double> control_seconds{};                  ///< per pattern: the ZeroMQ hops in a lone request's TTFT
  long same_tokens = 0, compared = 0;                     ///< requests whose 1P1D tokens are the colocated engine's
  EngineConfig colocated_config{};                        ///< lab 06's rung, silent
  DType weight_dtype = DType::F32;                        ///< the colocated model's
};

/// (c) Colocated (lab 06: chunked prefill, continuous batching) vs disaggregated 1P1D on the request patterns
/// of the prefill/decode article's strategy table, lengths scaled down to this machine: lab 06's rung and
/// lab 07's on the same workloads and the same cores in total, TTFT/TPOT and goodput under an SLO.
RealServing colocated_vs_disaggregated(Report& report, const LabOptions& o, const Flags& f, const ModelConfig& c,
                                       int threads, const PatternLengths& lengths,
                                       const std::vector<Pattern>& patterns);

/// Table (d) and its error, which table (e)'s note quotes.
struct SimulatorCheck {
  Table table{};
  Summary error{};                 ///< |error| over the rows, %
  double decode_step_colocated{};  ///< s: the fitted colocated model's decode step (4 requests at a long prompt)
  double decode_step_worker{};     ///< s: the same step on the fitted worker model (half the threads)
};

/// (d) The simulator checked against (c): lab 06's cost model fitted to the colocated steps, then (c) replayed on
/// simulated instances, 1P1D with the transfer rate measured in (b). Its error is what (e)'s numbers are worth.
SimulatorCheck simulator_check(const LabOptions& o, const ModelConfig& c, int threads, const RealServing& real,
                               const std::vector<Pattern>& patterns, double sm_write_bytes_per_second, const SLO& slo);

/// One fleet of table (e), as the strategy check and the papers' comparison (h) read it.
struct FleetResult {
  std::string fleet{};         ///< "colocated x2, chunked prefill", "2P1D"
  std::string strategy{};      ///< its kind in the article's words: "continuous batching", "chunked prefill",
                               ///< "disaggregated, more prefill", "disaggregated, even split", "... more decode"
  int gpus = 0;                ///< GPUs in all
  double goodput_per_gpu = 0;  ///< DistServe's goodput per GPU, requests/s
  double resolution = 0;       ///< requests/s per GPU: how far the bisection may leave goodput_per_gpu below its rate
  double slo_scale = 0;        ///< at the fixed load: the factor on both SLO limits that 90% of requests meet
  double ttft_p50 = 0, tpot_p50 = 0;  ///< at the fixed load, seconds
};

/// Table (e)'s fleets for one pattern.
struct PatternFleets {
  std::string pattern{}, article_says{};  ///< the pattern and the strategy the article suggests for it
  std::vector<FleetResult> fleets{};      ///< in table order
  /// The fleet with the highest goodput per GPU.
  const FleetResult& best() const;
};

/// Table (e), per pattern.
struct Fleets {
  Table table{};
  std::vector<PatternFleets> patterns{};  ///< in table order
};

/// The GPU-scale request patterns of (e) and (f): the article's thresholds (short < 512 tokens, long > 2K).
std::vector<Pattern> gpu_patterns();

/// The engines of a simulated GPU fleet: colocated chunked at --sim-budget, prefill and decode pools at 8,192,
/// every instance's KV budget from @p prefill_gpu or @p decode_gpu; the KV moves over @p link in bf16.
FleetConfig gpu_fleet(const Flags& f, const SimulatedGpu& prefill_gpu, const SimulatedGpu& decode_gpu,
                      const Link& link);

/// @p pattern's workload of @p num_requests arriving as @p arrivals says (an --arrivals spec), seeded by --seed.
std::vector<WorkloadRequest> gpu_workload(const LabOptions& o, const Pattern& pattern, int num_requests,
                                          const std::string& arrivals, int vocab_size);

/// Lab 06's metrics of a simulated fleet's run under @p slo.
ServingMetrics fleet_metrics(const FleetRun& run, const SLO& slo);

/// (e) The prefill/decode article's strategy table at its scale, simulated: colocated (continuous batching, and
/// chunked prefill) against xPyD on the same number of GPUs, each fleet's latencies at a fixed load and its goodput
/// per GPU (DistServe's), so the strategy that pays shows per pattern; a claim per pattern checks the article's.
Fleets simulated_fleets(Report& report, const LabOptions& o, const Flags& f, const Link& gpu_link,
                        const Summary& calibration_error);

/// (f) The upgrade question, simulated: 1P1D with the prefill and the decode pool each on an A100, H100 or H200,
/// and colocated pairs of each; which side's upgrade moves TTFT and which TPOT, checked as claims.
Table gpu_upgrades(Report& report, const LabOptions& o, const Flags& f, const Link& gpu_link);

/// (g) The KV cache article's 8,000-token summarisation (§5-4) worked through: prefill on --sim-gpu, the KV's
/// bytes and its time over each named link, decode on --sim-decode-gpu alone and batched; the premise as a claim.
Table summarisation_walkthrough(Report& report, const Flags& f);

/// (h) DistServe's and Mooncake's headline numbers with their conditions, beside the closest reproduction in (e).
Table paper_numbers(const Fleets& fleets, const Flags& f);

/// The prefill/decode article's mechanism, checked on table (a)'s own numbers @p a: does the transfer dominate
/// short prompts, and is it small beside a long prompt's prefill? @p control_s is the measured control-message
/// round trip, seconds (claims.cpp).
void transfer_claims(Report& report, const Table& a, const Flags& f, double control_s);

/// Table (c)'s verdict from its medians over the repeats (@p real), with the simulator's check and the
/// serving @p threads: did the split pay on this machine, and did it take the prefill out of the decode steps?
void serving_claims(Report& report, const RealServing& real, const std::vector<Pattern>& patterns,
                    const SimulatorCheck& check, int threads);

}  // namespace servelab::lab07
