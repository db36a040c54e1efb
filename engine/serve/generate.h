// SPDX-License-Identifier: MIT
/**
 * @file generate.h
 * @brief Autoregressive generation for one request: a prefill step over the
 *        prompt, then one decode step per new token, with per-step timings.
 *        The request is checked as the serving loop (serve/engine.h) checks
 *        one, and runs through labs 01-02's own loop, generate_loop(), so the
 *        first labs need none of lab 04's blocks and scheduler.
 *
 * With the KV cache off (Hugging Face's `use_cache=False`) every step feeds
 * the whole sequence so far through Model::forward() with no cache at all,
 * recomputing every earlier token's K and V; with it on, a decode step feeds
 * only the newest token.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/model.h"
#include "model/sampler.h"
#include "serve/metrics.h"

namespace servelab {

/// Settings of one generate() call.
struct GenerateOptions {
  int max_new_tokens = 32;                   ///< tokens to generate (fewer if a stop token appears)
  bool use_kv_cache = true;                  ///< false recomputes the whole sequence every step
  SamplingParams sampling;                   ///< greedy by default
  std::vector<std::int32_t> stop_token_ids;  ///< generation ends after emitting one of these
};

/// Generated tokens and timings, all times in seconds.
struct GenerateResult {
  std::vector<std::int32_t> output_ids;  ///< new tokens only
  std::vector<double> step_seconds;      ///< one per new token: [0] is TTFT, then each ITL (serve/metrics.h)
  std::vector<int> step_tokens;          ///< tokens fed to the model in each step
  int prompt_tokens = 0;                 ///< prompt length

  /// The request's latencies (serve/metrics.h), from step_seconds: arrival at 0, token i at the sum of steps 0..i.
  RequestMetrics metrics() const;
  /// Time to first token: the prefill step, sampling included; 0 with no step.
  double ttft() const { return step_seconds.empty() ? 0.0 : metrics().ttft; }
  /// End-to-end time: every step, the prefill included; 0 with no step.
  double e2e() const { return step_seconds.empty() ? 0.0 : metrics().e2e; }
  /// Mean time per output token after the first (vLLM: (E2E - TTFT) / (n - 1)); 0 with fewer than 2 tokens.
  double tpot() const { return step_seconds.empty() ? 0.0 : metrics().tpot; }
  /// Prompt tokens per second of prefill.
  double prefill_tokens_per_second() const;
  /// Output tokens per second after the first.
  double decode_tokens_per_second() const;
};

/**
 * @brief Generates up to options.max_new_tokens tokens after @p prompt.
 * @param on_token called with each new token as soon as it is sampled (streaming); may be empty.
 * @throws Error (before any step runs) when the prompt is empty, a token id is
 *         outside the vocabulary, max_new_tokens < 1, or prompt + max_new_tokens
 *         exceeds max_position_embeddings.
 */
GenerateResult generate(Model& model, std::span<const std::int32_t> prompt, const GenerateOptions& options,
                        const std::function<void(std::int32_t)>& on_token = {});

/**
 * @brief The loop of one request over a contiguous cache: lab 01's
 *        generation, and lab 02's change to it. generate() calls it after
 *        checking the request.
 *
 * Step k (k = 1 .. max_new_tokens) feeds the tokens of the sequence
 * (prompt + the k - 1 tokens so far) from a first index on, as a Batch of
 * one sequence with block table {0} and num_computed_tokens = that index,
 * logits for its last row only (Batch::add's default), and samples one token:
 * - without a cache (options.use_kv_cache false, lab 01; transformers'
 *   generate(use_cache=False)) the first index is always 0: the whole
 *   sequence is fed again to Model::forward(batch) with no cache, every
 *   earlier token's K and V recomputed and dropped after the step; @p cache
 *   is neither read nor written;
 * - with it (lab 02) the cache keeps what earlier steps wrote: the first
 *   index is the number of tokens already in the cache, so step 1 feeds the
 *   prompt and each later step only the newest token.
 *
 * The token is that step's Sampler(options.sampling) draw (one Sampler for the
 * whole call; a greedy one asks Model::forward_greedy() for the argmax alone,
 * which on CUDA picks on the device). It is appended to the sequence and to
 * output_ids and passed to @p on_token. Generation stops after
 * max_new_tokens tokens, or right after emitting a token of
 * options.stop_token_ids (that token is part of the output).
 *
 * Fills every field of the result: output_ids, prompt_tokens,
 * step_tokens[k-1] = tokens fed to step k, step_seconds[k-1] = wall time of
 * step k, forward and sampling included (core/timer.h's now_seconds()).
 * @param cache a contiguous cache whose block 0 holds prompt + max_new_tokens tokens.
 * @pre the request is valid (generate() checks it): prompt not empty, ids in
 *      the vocabulary, max_new_tokens >= 1, the whole sequence within the
 *      model's max_position_embeddings.
 */
GenerateResult generate_loop(Model& model, KVCache& cache, std::span<const std::int32_t> prompt,
                             const GenerateOptions& options, const std::function<void(std::int32_t)>& on_token = {});

}  // namespace servelab
