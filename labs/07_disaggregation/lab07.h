// SPDX-License-Identifier: MIT
/**
 * @file lab07.h
 * @brief Lab 07's tables, one function each: (b) and (c) run real processes
 *        (measured.cpp), (d) and (e) run the simulator (simulated.cpp);
 *        main.cpp parses the flags, computes (a) and prints the verdict.
 * @see labs/07_disaggregation/README.md
 */
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "core/stats.h"
#include "disagg/link.h"
#include "lab.h"
#include "serve/engine.h"
#include "serve/metrics.h"
#include "workload/workload.h"

namespace servelab::lab07 {

using disagg::Link;
using lab::LabOptions;
using lab::Report;
using lab::Table;

/// Lab 07's own flags (the common ones are in LabOptions), with their defaults.
struct Flags {
  std::string exe{};  ///< runs the router and the workers
  int prompt_len = 512, num_requests = 12;
  double rate = 4, slo_ttft_ms = 500, slo_tpot_ms = 50;
  std::string sim_model = "llama-3-8b", sim_gpu = "H100 SXM", sim_link = "ib-hdr";
  int sim_requests = 300, sim_budget = 2048;
  double sim_load = 0.7, sim_overhead_ms = 4, sim_slo_ttft_ms = 1000, sim_slo_tpot_ms = 15;
};

/// An engine log that drops its lines: the lab prints no preemption lines.
inline void silent(const std::string&) {}

/// A request pattern of the prefill/decode article's strategy table, and the strategy it suggests.
struct Pattern {
  std::string name, seed_says;
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

/// Table (c) and what the simulator check (d) replays and compares with.
struct RealServing {
  Table table{};
  std::vector<std::pair<Work, double>> steps{};           ///< the colocated steps: the simulator's calibration data
  std::vector<std::vector<WorkloadRequest>> workloads{};  ///< per pattern, for the simulator check
  std::vector<std::array<ServingMetrics, 2>> real{};      ///< per pattern: colocated, 1P1D
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
  Summary error{};  ///< |error| over the rows, %
};

/// (d) The simulator checked against (c): lab 06's cost model fitted to the colocated steps, then (c) replayed on
/// simulated instances, 1P1D with the transfer rate measured in (b). Its error is what (e)'s numbers are worth.
SimulatorCheck simulator_check(const LabOptions& o, const ModelConfig& c, int threads, const RealServing& real,
                               const std::vector<Pattern>& patterns, double sm_write_bytes_per_second, const SLO& slo);

/// Table (e) and the best fleet of each pattern, for the verdict.
struct Fleets {
  Table table{};
  std::vector<std::string> winners{};  ///< "pattern: best fleet", in pattern order
};

/// (e) Seed 001's question at its scale, simulated: colocated against xPyD on the same number of GPUs, each
/// fleet's latencies at a fixed load and its goodput per GPU (DistServe's), so the split that pays shows per pattern.
Fleets simulated_fleets(const LabOptions& o, const Flags& f, const Link& gpu_link, const Summary& calibration_error);

}  // namespace servelab::lab07
