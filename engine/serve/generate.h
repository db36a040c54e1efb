// SPDX-License-Identifier: MIT
/**
 * @file generate.h
 * @brief Autoregressive generation for one request: a prefill step over the
 *        prompt, then one decode step per new token, with per-step timings.
 *        A thin wrapper over one request in the serving loop (serve/engine.h).
 *
 * With the KV cache off (Hugging Face's `use_cache=False`) every step feeds
 * the whole sequence so far into a fresh cache, recomputing every earlier
 * token's K and V; with it on, a decode step feeds only the newest token.
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

}  // namespace servelab
