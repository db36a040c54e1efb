// SPDX-License-Identifier: MIT
/**
 * @file kv_budget.h
 * @brief The KV cache budget `servelab serve` takes when no flag gives one:
 *        what its requests can need, capped by what the machine has.
 *
 * A server that must hold max_num_seqs sequences of max_model_len at once
 * would reserve, for a 135M model with an 8k context and 16 seats, 6 GB of
 * KV before its first request. It does not need to: without chunked
 * prefill no prompt is longer than one step's token budget
 * (max_num_batched_tokens), and a batch whose decodes outgrow the pool
 * preempts its newest request and recomputes it later (vLLM's preemption by
 * recompute), so the pool needs room for every seat's largest prompt, and
 * for one request of max_model_len so that any request the server accepts
 * can run.
 * @verbatim
 *  need  = max(max_num_seqs × min(max_model_len, max_num_batched_tokens), max_model_len) tokens
 *  cap   = min(4 GiB (vLLM's CPU KV default), MemAvailable / 4)
 *  bytes = min(need, cap) × KV bytes per token, in whole blocks
 * @endverbatim
 */
#pragma once

#include <cstddef>
#include <string>

namespace servelab {

/// What default_kv_budget() chose and why, for the line serve prints at start.
struct KVBudget {
  std::size_t bytes = 0;          ///< the budget, a whole number of blocks
  std::size_t need_bytes = 0;     ///< what the formula's need comes to
  std::size_t cap_bytes = 0;      ///< the cap: min(4 GiB, MemAvailable / 4)
  std::size_t mem_available = 0;  ///< /proc/meminfo MemAvailable, bytes; 0 when unknown
  long tokens = 0;                ///< tokens the budget holds
  /// One line: the budget, its tokens and the terms it came from.
  std::string describe() const;
};

/// Most KV bytes a default budget takes: vLLM's CPU default (VLLM_CPU_KVCACHE_SPACE, 4 GiB).
inline constexpr std::size_t kMaxDefaultKVBytes = std::size_t{4} << 30;

/**
 * @brief The default KV budget (the formula above).
 * @param kv_bytes_per_token KV bytes of one token over all layers.
 * @param block_size tokens per block (>= 1); the budget is whole blocks, at least one.
 * @param max_num_seqs seats in a step (>= 1).
 * @param max_model_len longest prompt + output (>= 1).
 * @param max_num_batched_tokens the step's token budget (>= 1).
 * @param mem_available bytes the machine has free (MemAvailable); 0 = unknown, then only 4 GiB caps.
 */
KVBudget default_kv_budget(std::size_t kv_bytes_per_token, int block_size, int max_num_seqs, int max_model_len,
                           int max_num_batched_tokens, std::size_t mem_available);

/// MemAvailable from /proc/meminfo, bytes; 0 when the file or the line is missing (not Linux).
std::size_t mem_available_bytes();

}  // namespace servelab
