// SPDX-License-Identifier: MIT
/**
 * @file attention.h
 * @brief Causal grouped-query attention over a KV cache: lab 05's
 *        progression, from the plain-loop reference (v0, attention_naive)
 *        that every later version is tested against, through standard,
 *        blocked and flash attention, to split-K decode; one file per
 *        version (attention_v0_reference.cpp ... attention_v5_paged.h).
 *
 * For a query at position p of a sequence, head h reads K/V head
 * h / (num_heads / num_kv_heads) for tokens 0..p:
 * \f[ o = \sum_{t \le p} \mathrm{softmax}_t\!\left(\frac{q \cdot k_t}{\sqrt{d}}\right) v_t \f]
 * The scores of one query row are materialised in full (length p + 1):
 * this is the memory traffic lab 05's flash attention removes.
 * @see labs/05_flash_attention/README.md
 */
#pragma once

#include <algorithm>
#include <string>
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

/// How much of the score matrix v1 (attention_standard()) computes.
enum class StandardWork {
  /// Every (query, key) pair, the masked ones thrown away afterwards, as the paper's Algorithm 0 reads:
  /// about twice the FLOPs flash does on a causal prefill.
  FULL_MATRIX,
  /// Query tiles of kFlashQueryTile rows, each scored only against the keys its last query may see: flash's
  /// work exactly (the same pairs computed), with S and P still written out in full. The equal-work baseline.
  SKIP_MASKED,
};

/**
 * @brief Lab 05's v1, standard attention as the FlashAttention paper states
 *        it: S = Q·Kᵀ, P = softmax(S), O = P·V, with S and P written out in
 *        full ([num_new_tokens, keys] per head) before the next step reads
 *        them.
 * @param work FULL_MATRIX computes every pair; SKIP_MASKED skips the tiles
 *        above the diagonal, so it does flash's FLOPs and differs from flash
 *        only in the traffic of S and P.
 * @see engine/kernels/attention_v1_standard.cpp for what it moves.
 */
void attention_standard(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                        const AttentionShape& shape, StandardWork work = StandardWork::FULL_MATRIX);

/// A block of new tokens of one head of one sequence: the work item of v1 (skipping), v2 and v3.
struct QueryBlock {
  const AttentionSeq* seq = nullptr;  ///< the sequence (not owned)
  int head = 0;                       ///< query head
  int first = 0;                      ///< first query row of the block, among the sequence's new tokens
  int count = 0;                      ///< query rows in the block: [first, first + count)
};

/// Every (sequence, head, block of up to @p block_rows new tokens), in that order.
inline std::vector<QueryBlock> query_blocks(const std::vector<AttentionSeq>& seqs, int num_heads, int block_rows) {
  std::vector<QueryBlock> items;
  for (const auto& s : seqs)
    for (int h = 0; h < num_heads; ++h)
      for (int i = 0; i < s.num_new_tokens; i += block_rows)
        items.push_back({&s, h, i, std::min(block_rows, s.num_new_tokens - i)});
  return items;
}

/**
 * @brief Lab 05's v3, FlashAttention: query tiles against key tiles with
 *        the online softmax; S and P live only in a per-thread tile.
 *
 * The work items are query_blocks(seqs, num_heads, kFlashQueryTile). For an
 * item (sequence s, query head h, rows [first, first + count) of s's new
 * tokens), in a thread's FlashRows (attention_flash_tile.h):
 * 1. reset the state to count rows of width head_dim;
 * 2. row r is the query at position p = s.num_computed_tokens + first + r
 *    and may see keys [0, p + 1): visible[r] = p + 1 (causal; a chunk after
 *    a cached prefix sees the whole prefix);
 * 3. add the key tiles [t0, min(keys, t0 + kFlashKeyTile)) for t0 = 0, 64,
 *    ... while t0 < keys, keys = visible[count - 1] (the last row sees the
 *    most; no tile past it is touched), each with flash_add_key_tile() on
 *    KV head h / (num_heads / num_kv_heads), scale attention_scale(head_dim)
 *    and exact = ctx.deterministic;
 * 4. write each row with flash_write_row() to its row of @p out, at column
 *    h · head_dim (the row stride of q and out is num_heads · head_dim).
 *
 * Key tiles start at multiples of kFlashKeyTile (absolute key positions), so
 * a row is cut into the same tiles whichever batch it is in. In
 * deterministic mode every row is computed alone with fixed-order loops, so
 * its result depends only on its query and its keys. Same contract as
 * attention_naive().
 * @see engine/kernels/attention_v3_flash.cpp
 */
void attention_flash(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                     const AttentionShape& shape);

/**
 * @brief Lab 05's v4, split-K (flash-decoding): each sequence's keys are cut
 *        into @p num_splits ranges of whole key tiles, one work item per
 *        (sequence, KV head, range) that scores every query head of the GQA
 *        group against the range; the partial softmax states are merged with
 *        online_softmax_merge().
 *
 * One item's partial (keys [t_begin, t_end), t_begin on a key-tile edge):
 * its rows are the group's query heads of each new token (row
 * tok · group + g is head kvh · group + g of new token tok, and may see
 * keys [0, num_computed_tokens + tok + 1)). From the empty state, add the
 * key tiles [t0, min(t_end, t0 + kFlashKeyTile)) for t0 = t_begin,
 * t_begin + 64, ... while t0 < t_end with flash_add_key_tile() (scale
 * attention_scale(head_dim), exact = ctx.deterministic), and keep the rows'
 * Õ, m and l for the merge. A row that sees no key of the range keeps the
 * empty state (m = −∞).
 *
 * The merge of one row: its pieces in key order, empty ones skipped. From
 * the empty state (m = −∞, l = 0, Õ = 0), each piece (m_b, l_b, Õ_b) gives
 * m' = max(m, m_b), l = l·e^(m − m') + l_b·e^(m_b − m') and
 * Õ = Õ·e^(m − m') + Õ_b·e^(m_b − m'): a piece weighs e^(its max − the new
 * max), never its share of the keys. Then O = Õ / l (zeros when no piece
 * saw a key) goes to the row's head in @p out. Same contract as
 * attention_naive().
 * @param num_splits pieces per sequence; 0 = chosen from the context and the
 *        thread count (split_k_pieces()); at most one per key tile.
 *        Deterministic mode always uses 1.
 * @see engine/kernels/attention_v4_split_k.cpp
 */
void attention_split_k(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                       const AttentionShape& shape, int num_splits = 0);

/// Keys per flash tile (v3, v4): 64 keys × 64 dims of K and V is 32 KiB, an L1's worth.
inline constexpr int kFlashKeyTile = 64;
/**
 * Queries per flash tile (v3). K and V are read once per query tile, so the
 * tile's height sets the traffic (the paper's Θ(N²d²/M)): 256 rows of Q and
 * Õ at d = 64 plus a 256 × 64 score tile are 192 KiB, inside a 1 MiB L2.
 */
inline constexpr int kFlashQueryTile = 256;

/**
 * @brief The pieces attention_split_k() cuts a context of @p keys into when
 *        asked for 0: one when the work items (sequences × KV heads) already
 *        give each of @p threads two, otherwise enough for about four per
 *        thread (contiguous chunks of uneven items then even out), each at
 *        least 8 key tiles (shorter pieces cost more to merge than they save).
 */
int split_k_pieces(int keys, int work_items, int threads);

/// Which attention the engine runs (ModelOptions::attention, `--attention`).
enum class AttentionKind {
  NAIVE,    ///< attention_naive() for every row (lab 05's v0)
  BLOCKED,  ///< attention_blocked() for prefill, attention_naive() for decode and in deterministic mode (before lab 05)
  FLASH,    ///< attention_flash() for prefill, attention_split_k() for decode (lab 05)
};

/// "naive", "blocked" or "flash".
const char* to_string(AttentionKind kind);
/**
 * @brief Parses "naive", "blocked" or "flash".
 * @throws Error naming @p flag for anything else.
 */
AttentionKind parse_attention_kind(const std::string& text, const std::string& flag);

/**
 * @brief The attention the model runs, chosen by @p kind (see AttentionKind).
 *
 * With FLASH, sequences with fewer than 16 new tokens (decode) go to
 * attention_split_k() with its automatic split, the others to
 * attention_flash(). In deterministic mode BLOCKED falls back to
 * attention_naive() (sgemm rounding depends on shapes) while FLASH keeps
 * flash, whose deterministic path is batch-invariant by construction.
 */
void attention(const KernelContext& ctx, AttentionKind kind, float* out, const float* q,
               const std::vector<AttentionSeq>& seqs, const AttentionShape& shape);

/// attention() with AttentionKind::BLOCKED, the engine's choice before lab 05.
inline void attention(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                      const AttentionShape& shape) {
  attention(ctx, AttentionKind::BLOCKED, out, q, seqs, shape);
}

}  // namespace servelab
