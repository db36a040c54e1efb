// SPDX-License-Identifier: MIT
/**
 * @file batch.h
 * @brief A ragged batch: the new tokens of several sequences, concatenated,
 *        as vLLM flattens them. Prefill, decode, chunked prefill and mixed
 *        batches are all one Model::forward() call with different slices.
 * @verbatim
 *  token_ids:  | seq A: 5 prompt tokens | seq B: 1 decode token | seq C: 3 ... |
 *  seqs:       {blocks [0], computed 0, new 5} {blocks [3, 7, 1], computed 41, new 1} ...
 *  positions:  0 1 2 3 4                    41                     ...
 * @endverbatim
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace servelab {

/// One sequence's share of a batch.
struct SequenceChunk {
  /// Physical KV blocks of the sequence, logical block order; must cover num_computed + num_new tokens.
  std::vector<std::int32_t> block_table;
  int num_computed_tokens = 0;  ///< tokens already in the cache; the first new token has this position
  int num_new_tokens = 0;       ///< tokens of this sequence in Batch::token_ids
};

/// Which rows of a sequence's new tokens get logits.
enum class LogitsFor { None, Last, All };

/// Input of one model step.
struct Batch {
  std::vector<std::int32_t> token_ids;       ///< [num_tokens] new tokens of every sequence, in seqs order
  std::vector<SequenceChunk> seqs;           ///< the sequences, in token order
  std::vector<std::int32_t> logits_indices;  ///< rows of token_ids whose logits forward() returns, in order

  /**
   * @brief Appends one sequence's new tokens.
   * @param block_table the sequence's KV blocks (one block = contiguous).
   * @param num_computed_tokens tokens of it already in the cache.
   * @param tokens its new tokens.
   * @param logits which of them need logits (Last for sampling, All for scoring a prompt).
   */
  void add(std::vector<std::int32_t> block_table, int num_computed_tokens, std::span<const std::int32_t> tokens,
           LogitsFor logits = LogitsFor::Last) {
    const auto first = static_cast<std::int32_t>(token_ids.size());
    const auto n = static_cast<std::int32_t>(tokens.size());
    token_ids.resize(token_ids.size() + tokens.size());
    std::copy(tokens.begin(), tokens.end(), token_ids.begin() + first);
    seqs.push_back({std::move(block_table), num_computed_tokens, n});
    if (logits == LogitsFor::All)
      for (std::int32_t i = 0; i < n; ++i) logits_indices.push_back(first + i);
    else if (logits == LogitsFor::Last && n > 0)
      logits_indices.push_back(first + n - 1);
  }
  /// Number of token rows.
  int num_tokens() const { return static_cast<int>(token_ids.size()); }
};

}  // namespace servelab
