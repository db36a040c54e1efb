// SPDX-License-Identifier: MIT
/**
 * @file engine_flags.h
 * @brief The engine flags that `servelab serve` and
 *        `servelab bench serve --compare-in-process` share, with vLLM's names,
 *        so the in-process engine a benchmark compares with is set up exactly
 *        as the server's (the model flags are cli/model_flags.h's).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/model_flags.h"
#include "serve/engine.h"

namespace servelab::cli {

/// The flags' values: the model flags every command takes, and the engine's.
struct EngineFlags : ModelFlags {
  /// Serving runs lab 05's kernels, flash prefill and split-K decode (vLLM serves with FlashAttention):
  /// the naive decode loop they replace took a quarter of a 16-stream step (tools/serve_breakdown.sh),
  /// and lab 05's serving check shows they change no greedy token.
  EngineFlags() { attention = "flash"; }
  int max_num_seqs = 16;                ///< --max-num-seqs
  int max_num_batched_tokens = 2048;    ///< --max-num-batched-tokens
  bool enable_chunked_prefill = false;  ///< --enable-chunked-prefill
  int long_prefill_token_threshold = 0;  ///< --long-prefill-token-threshold: most tokens of one request per step
  int block_size = 16;                  ///< --block-size
  std::size_t kv_cache_memory = 0;      ///< --kv-cache-memory, bytes; 0 = max-num-seqs sequences of max-model-len
  double gpu_memory_utilization = 0;    ///< --gpu-memory-utilization (CUDA)
  int max_model_len = 0;                ///< --max-model-len; 0 = the model's
  bool enable_prefix_caching = true;    ///< --enable-prefix-caching / --no-enable-prefix-caching (vLLM's default: on)
};

/// Registers the model flags and the engine flags on @p app; --model and --preset exclude each other.
void add_engine_flags(CLI::App& app, EngineFlags& flags);

/**
 * @brief The engine configuration the flags describe (continuous batching; checked by the Engine).
 * @throws Error naming --long-prefill-token-threshold when it is negative, or set without --enable-chunked-prefill.
 */
EngineConfig engine_config(const EngineFlags& flags);

/**
 * @brief engine_config() for @p model, with the default KV budget (kv/kv_budget.h: what the seats
 *        and lengths need, capped by the machine's MemAvailable) when neither --kv-cache-memory
 *        nor --gpu-memory-utilization gives one; the budget's line (KVBudget::describe()) goes to @p log.
 * @throws Error as engine_config(), and naming the flag when a size the budget needs is out of range.
 */
EngineConfig engine_config(const EngineFlags& flags, const ModelConfig& model,
                           const std::function<void(const std::string&)>& log);

}  // namespace servelab::cli
