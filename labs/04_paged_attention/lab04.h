// SPDX-License-Identifier: MIT
/**
 * @file lab04.h
 * @brief Lab 04's space tables (space.cpp): where KV memory goes with
 *        contiguous regions and with paged blocks; and its time side
 *        (time.cpp): one policy's serving run and the continuous run's
 *        timeline. main.cpp serves the workload with each policy, tabulates
 *        the runs and prints the verdict.
 * @see labs/04_paged_attention/README.md
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include <vector>

#include "lab.h"
#include "serve/engine.h"
#include "serve/ladder.h"
#include "serve/metrics.h"
#include "workload/workload.h"
#include "serving.h"

namespace servelab::lab04 {

using namespace servelab::lab;

/// 1a. The KV cache article §4-1's requests A, B and C in this lab's room of 6,200 tokens, then the lab's request D
///     arriving after B finished: contiguous first fit against blocks of @p block_size tokens. Shows fragmentation
///     on numbers a learner can check by hand.
Table fragmentation_example(int block_size);

/// Table 1b (printed) and its timeline (plotted, not printed).
struct KVMemory {
  Table table{}, timeline{};
};

/**
 * @brief 1b. A ShareGPT-like workload of @p memory_requests requests through each KV layout, the scheduler
 *        without a model (a dry run), in room for @p memory_seqs requests of @p memory_max_model_len tokens:
 *        how much of the held KV holds real tokens, and how many requests fit at once.
 * @param token_bytes KV bytes of one token (all layers).
 */
KVMemory kv_memory(int memory_requests, int memory_max_model_len, int memory_seqs, std::uint64_t seed, int vocab_size,
                   std::size_t token_bytes);

/// One policy's serving run over the workload on the real model (time.cpp).
struct ServingRun {
  SchedulingPolicy policy = SchedulingPolicy::CONTINUOUS;
  ServingMetrics metrics{};
  ServedRun run{};  ///< its steps and every request's tokens
  int preemptions = 0;
  double wall = 0, busy = 0, schedule = 0;
};

/// Serves @p workload on @p model with @p lab_config's engine (its policy), advancing @p bar by each step's outputs.
ServingRun serve(Model& model, const LabConfig& lab_config, const std::vector<WorkloadRequest>& workload,
                 Progress& bar);

/// The continuous run @p cont, step by step, for the timeline plots (saved, not printed).
Table timeline_table(const ServingRun& cont);

/// Table 2 and each policy's run (the continuous one is the timeline's).
struct Serving {
  Table table{};
  std::vector<ServingRun> runs{};  ///< one at a time, static, continuous
  bool same_tokens = true;         ///< every request got the same tokens under every policy
  std::string mismatch{};          ///< the first request that did not, and how many
};

/// 2. Time (time.cpp): @p workload served by lab 03's rung, static batching and lab 04's rung on @p model over
///    @p base: what continuous batching buys in tokens/s and latency, with every request's tokens checked equal
///    (with @p fast_reductions they may differ, and the table says where). Records each configuration on @p report.
Serving serving_table(lab::Report& report, Model& model, const LabConfig& base,
                      const std::vector<WorkloadRequest>& workload, bool fast_reductions);

/// The chapter's claims (claims.cpp), each decided on this run's tables: @p fragmentation, @p memory and
/// @p serving of @p num_requests requests with the run's @p block_size, @p max_num_seqs and the dry run's
/// @p memory_requests; then the verdict.
void check_claims(lab::Report& report, const Table& fragmentation, const KVMemory& memory, const Serving& serving,
                  std::size_t num_requests, int block_size, int max_num_seqs, int memory_requests);

/**
 * @brief 3. Prefix caching (prefix_cache.cpp): 20 requests sharing a 256-token system prompt (@p quick: 10
 *        sharing 128), the first alone and the rest just after it, served by @p lab4's engine with automatic
 *        prefix caching off and on. Adds the table (hit rate, prompt tokens computed, TTFT) and the claim
 *        04.prefix_cache, decided on this run, to @p report.
 */
void prefix_cache_section(lab::Report& report, Model& model, const LabConfig& lab4, bool quick);

}  // namespace servelab::lab04
