// SPDX-License-Identifier: MIT
/**
 * @file ladder.h
 * @brief The course's ladder of techniques, and the configuration each rung
 *        runs: lab N runs lab N-1's configuration with one more switch on.
 *
 * | lab | switch turned on | field configure() sets |
 * |-----|------------------|------------------------|
 * | 01_autoregressive | none: every step recomputes the whole sequence | |
 * | 02_kv_cache | kv_cache | EngineConfig::enable_kv_cache |
 * | 03_roofline | none: measures lab 02's configuration (perf/counter.h, perf/cost_model.h) | |
 * | 04_paged_attention | paged_kv_cache and continuous_batching: the KV cache article (§6) calls them a pair, space and time | EngineConfig::block_size, SchedulerConfig::policy |
 * | 05_flash_attention | flash_attention: tiled attention with the online softmax, split-K for long decodes | ModelOptions::attention |
 * | 06_chunked_prefill | chunked_prefill | SchedulerConfig::enable_chunked_prefill |
 * | 07_disaggregation | disaggregation: prefill and decode in separate worker processes (engine/disagg/) | LabConfig::disaggregated |
 *
 * A lab builds both of its configurations from the same base:
 * @code
 *   const LabConfig before = configure(Techniques::for_lab(4), base);  // lab 03's: contiguous, one at a time
 *   const LabConfig after = configure(Techniques::for_lab(5), base);   // + flash attention
 *   // differences(before, after) == {"model.attention"}
 * @endcode
 * @see labs/04_paged_attention/README.md (the ladder is read there first)
 */
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "serve/engine.h"

namespace servelab {

/// Serving techniques that the labs turn on one at a time.
struct Techniques {
  bool kv_cache = false;  ///< lab 02: keep K/V of earlier tokens instead of recomputing them
  /// lab 04: KV in blocks of block_size tokens found through a block table, not one max-length region per request
  bool paged_kv_cache = false;
  /// lab 04: requests join and leave the running batch at every step (SchedulingPolicy::CONTINUOUS)
  bool continuous_batching = false;
  /// lab 05: attention in tiles with the online softmax (ModelOptions::attention = FLASH), split-K for long decodes
  bool flash_attention = false;
  /// lab 06: prompts split over steps so no step exceeds max_num_batched_tokens (SchedulerConfig::enable_chunked_prefill)
  bool chunked_prefill = false;
  /// lab 07: prefill and decode run in separate worker processes and the KV moves between them (engine/disagg/)
  bool disaggregation = false;

  /**
   * @brief The techniques on in lab @p lab (1-based).
   * @throws Error for a lab number outside the labs that exist.
   */
  static Techniques for_lab(int lab);
};

/// Everything one rung of the ladder runs: the engine level, the model level, and where prefill runs.
struct LabConfig {
  EngineConfig engine{};  ///< scheduler, KV layout and budget (EngineConfig::log is not part of the configuration)
  ModelOptions model{};   ///< backend, threads, dtype, reductions, attention kernels
  /// lab 07: prefill and decode run in separate workers (a prefill and a decode process, KV sent between them);
  /// false: one engine does both (colocated).
  bool disaggregated = false;
};

/**
 * @brief The configuration that @p techniques turn into, over @p base.
 *
 * Each switch sets its fields and nothing else; every other field is
 * @p base's (threads, dtype, reductions, budget, KV memory, ...):
 * - kv_cache: engine.enable_kv_cache;
 * - paged_kv_cache: engine.block_size = base.engine.block_size (paged), else
 *   base.engine.max_model_len (contiguous: one block of max_model_len tokens per request);
 * - continuous_batching: engine.scheduler.policy = CONTINUOUS, else ONE_AT_A_TIME;
 * - flash_attention: model.attention = FLASH, else base.model.attention (the kernels before lab 05);
 * - chunked_prefill: engine.scheduler.enable_chunked_prefill;
 * - disaggregation: disaggregated.
 * @throws Error when the layout is contiguous and base.engine.max_model_len is 0
 *         (a contiguous region needs a length).
 */
LabConfig configure(const Techniques& techniques, const LabConfig& base);

/// The configuration as JSON, every field by name (enums as their flag names); what a lab's results record.
nlohmann::ordered_json to_json(const LabConfig& config);
/// The inverse of to_json(); @throws Error naming the field that is missing or malformed.
LabConfig lab_config_from_json(const nlohmann::json& json);

/**
 * @brief The fields in which @p a and @p b differ, as dotted paths in to_json()'s
 *        order, e.g. {"engine.scheduler.policy", "model.attention"}; empty when equal.
 */
std::vector<std::string> differences(const LabConfig& a, const LabConfig& b);

}  // namespace servelab
