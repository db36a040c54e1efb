/**
 * @file attention.h
 * @brief Causal grouped-query attention over a KV cache: the naive
 *        reference every later variant (flash, paged, split-K) is tested against.
 *
 * For a query at position p of a sequence, head h reads K/V head
 * h / (num_heads / num_kv_heads) for tokens 0..p:
 * \f[ o = \sum_{t \le p} \mathrm{softmax}_t\!\left(\frac{q \cdot k_t}{\sqrt{d}}\right) v_t \f]
 * The scores of one query row are materialised in full (length p + 1):
 * this is the memory traffic lab 05's flash attention removes.
 */
#pragma once

#include <vector>

#include "kernels/context.h"
#include "kv/kv_view.h"

namespace servelab {

/// One sequence's slice of the batch, as attention sees it.
struct AttentionSeq {
  int first_row = 0;            ///< index of its first new token in the batch's rows
  int num_new_tokens = 0;       ///< new tokens (queries) in this step
  int num_computed_tokens = 0;  ///< tokens already in the cache before this step
  KVView kv;                    ///< this layer's K/V rows, new tokens already written
};

/// Head counts of a GQA attention layer.
struct AttentionShape {
  int num_heads = 0;     ///< query heads
  int num_kv_heads = 0;  ///< K/V heads; divides num_heads
  int head_dim = 0;      ///< width of each head
};

/**
 * @brief Naive causal GQA attention.
 * @param out [T, num_heads * head_dim] attention output rows.
 * @param q   [T, num_heads * head_dim] queries (RoPE applied).
 * @param seqs sequences of the batch; their rows partition [0, T).
 */
void attention_naive(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                     const AttentionShape& shape);

/**
 * @brief Causal GQA attention for prefill-sized query blocks through BLAS.
 *
 * What changed from attention_naive(): a block of up to 64 queries of one
 * head is scored against its keys with one sgemm (S = Q·Kᵀ), the causal
 * softmax runs over the rows of S, and O = P·V is a second sgemm. The keys
 * are read once per query block instead of once per query, and the dot
 * products run in BLAS's tuned kernels. What is left: S is still written
 * and read back (a 64 × L buffer per thread, never L × L); lab 05's flash
 * attention removes that traffic.
 *
 * Same contract as attention_naive(). Its rounding depends on the block
 * shapes, so deterministic mode does not use it.
 */
void attention_blocked(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                       const AttentionShape& shape);

/**
 * @brief The attention the model runs: attention_naive() in deterministic
 *        mode or when every sequence has few new tokens (decode),
 *        attention_blocked() otherwise.
 */
void attention(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
               const AttentionShape& shape);

}  // namespace servelab
