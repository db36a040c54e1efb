// SPDX-License-Identifier: MIT
/**
 * @file lab02.h
 * @brief Lab 02's memory tables (memory.cpp): what the KV cache costs in
 *        bytes, by the formula and as the engine allocates it. main.cpp
 *        times generation with the cache off and on, counts the work it
 *        removes and prints the verdict.
 * @see labs/02_kv_cache/README.md
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lab.h"
#include "model/model.h"
#include "perf/hardware.h"
#include "serve/generate.h"
#include "serve/ladder.h"

namespace servelab::lab02 {

using namespace servelab::lab;

/// Table 1 and the runs behind it.
struct SpeedRuns {
  Table table{};                                            ///< time to generate N tokens, cache off vs on
  std::vector<GenerateResult> longest_off{}, longest_on{};  ///< the timed runs of the largest N
  std::string hash{};                                       ///< token hash of the last cached run
};

/// 1. The article's experiment (time.cpp): @p model generates each of @p token_counts tokens from @p prompt
///    with lab 01's configuration @p no_cache and lab 02's @p kv_cache, alternated, o.warmup + o.repeats times;
///    fails naming the first different token if the two paths' tokens differ. @p fast_reductions says whether
///    the reductions were deterministic, for the note.
SpeedRuns speed_table(Model& model, const lab::LabOptions& o, const LabConfig& no_cache, const LabConfig& kv_cache,
                      const std::vector<int>& token_counts, const std::vector<std::int32_t>& prompt,
                      bool fast_reductions);

/// Median per-step seconds over @p runs that all generated the same number of tokens.
std::vector<double> median_steps(const std::vector<GenerateResult>& runs);

/// 2. The K/V-projection and attention GFLOP per step of @p c with and without the cache, for @p n new tokens
///    after a @p prompt_len-token prompt, beside the measured median step times (seconds).
Table work_table(const ModelConfig& c, int prompt_len, int n, const std::vector<double>& steps_off,
                 const std::vector<double>& steps_on);

/// Every step's time (ms) of the longest run, cache off and on, for the step-time plot.
Table step_times_table(int n, const std::vector<double>& steps_off, const std::vector<double>& steps_on);

/// 3. KV memory: the formula for the published models and their MHA/GQA/MQA variants: what GQA saves, and the
///    prefill/decode article's 270 MB and 670 MB checked.
Table kv_memory_table();

/// 4. The formula against what the engine's cache really allocates (f32 cache, sizes this machine can hold), one
///    row per case with "equal" yes or no. @p cases counts the cases checked.
Table kv_allocated_table(bool quick, int& cases);

/// 5. GPU memory = weights + KV + activations + runtime on @p card, for every model preset in bf16: how many
///    requests of 2,048 and 8,192 tokens the KV room left after the rest holds.
Table gpu_memory_table(const Hardware& card);

/// The chapter's claims (claims.cpp), each decided on this run's tables: the same tokens over @p lengths
/// lengths, the KV formula against the @p cases of @p allocated, the published KV sizes, @p gpu_memory's budget,
/// the speedup at @p n tokens and the step-time growth in @p steps_off / @p steps_on (seconds); then the verdict.
void check_claims(lab::Report& report, const SpeedRuns& speed, const Table& allocated, int cases,
                  const Table& gpu_memory, const std::vector<double>& steps_off, const std::vector<double>& steps_on,
                  std::size_t lengths, int n);

}  // namespace servelab::lab02
