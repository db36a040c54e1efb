/**
 * @file ladder.h
 * @brief The course's ladder of techniques in one place: lab N runs lab
 *        N-1's configuration with one more switch on.
 *
 * | lab | switch turned on |
 * |-----|------------------|
 * | 01_autoregressive | none: every step recomputes the whole sequence |
 * | 02_kv_cache | kv_cache |
 * | 03_roofline | none: measures lab 02's configuration (perf/counter.h, perf/cost_model.h) |
 * | 04_paged_attention | paged_kv_cache and continuous_batching: seed 000 §6 calls them a pair, space and time |
 * | 05_flash_attention | flash_attention: tiled attention with the online softmax, split-K for long decodes |
 * | 06_chunked_prefill | chunked_prefill |
 * | 07_disaggregation | disaggregation: prefill and decode in separate worker processes (engine/disagg/) |
 *
 * Later labs add their switch here (paged KV, flash attention, chunked
 * prefill, disaggregation), so the whole ladder reads top to bottom.
 */
#pragma once

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

}  // namespace servelab
