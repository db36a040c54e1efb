// SPDX-License-Identifier: MIT
/**
 * @file attention_flash.h
 * @brief Lab 05's CUDA attention: flash prefill (tiles of K and V in shared
 *        memory, the online softmax in registers) and split-K decode (a whole
 *        KV group per block, the context split across blocks, merged by the
 *        log-sum-exp rule). Same contract as cuda::attention_naive() (ops.h),
 *        without its score scratch in device memory.
 * @see labs/05_flash_attention/README.md
 */
#pragma once

#include <cstddef>

#include "cuda/ops.h"

namespace servelab::cuda {

/// Widest head the flash kernels take (4 floats per lane of a warp).
inline constexpr int kFlashMaxHeadDim = 128;
/// Most query heads per KV head the split-K kernel keeps in registers.
inline constexpr int kFlashMaxGroup = 16;

/**
 * @brief Flash attention over a ragged batch of any rows (prefill, chunks, decodes).
 *
 * One block per (query head, tile of 32 consecutive rows). When the tile's
 * rows are one sequence's, K and V are staged 32 keys at a time in shared
 * memory and every row of the tile reuses them; keys past the tile's last
 * row are never loaded (causal tile skipping). A tile that straddles two
 * sequences reads K and V per row from device memory instead.
 * @param out   [T, num_heads * head_dim]
 * @param q     [T, q_stride] queries (RoPE applied), heads from column 0.
 * @param rows  [T] each row's sequence and position; rows of a sequence consecutive, positions increasing.
 * @param views [num_seqs] this layer's K/V of each sequence, new tokens already written.
 * @throws Error when head_dim exceeds kFlashMaxHeadDim or the heads do not group.
 */
void attention_flash_prefill(float* out, const float* q, std::size_t q_stride, const AttentionRow* rows,
                             const KVView* views, int T, const AttentionHeads& heads);

/**
 * @brief Floats of scratch attention_split_k_decode() needs for @p T rows cut into @p num_splits pieces.
 */
std::size_t split_k_scratch_floats(int T, int num_heads, int head_dim, int num_splits);

/**
 * @brief Split-K decode attention: one block per (KV head, piece, row) scores
 *        all the group's query heads against the piece's keys, each warp
 *        reading whole K and V rows (coalesced); a second kernel merges the
 *        pieces of each (row, head).
 * @param max_keys   the most keys any row attends to (pieces are cut from it).
 * @param num_splits pieces; 0 = enough blocks for two waves on this device,
 *                   each piece at least 256 keys, as many as @p scratch_floats allows.
 * @param scratch    [split_k_scratch_floats()] partial states; unused with one piece.
 * @throws Error when the group exceeds kFlashMaxGroup or head_dim kFlashMaxHeadDim.
 */
void attention_split_k_decode(float* out, const float* q, std::size_t q_stride, const AttentionRow* rows,
                              const KVView* views, int T, int max_keys, const AttentionHeads& heads, int num_splits,
                              float* scratch, std::size_t scratch_floats);

/**
 * @brief The attention the CUDA model runs: split-K decode when every
 *        sequence brings one row (T == @p num_seqs), flash prefill otherwise.
 * @param scratch floats the decode may use for its pieces (the model's score buffer).
 */
void attention(float* out, const float* q, std::size_t q_stride, const AttentionRow* rows, const KVView* views, int T,
               int num_seqs, int max_keys, const AttentionHeads& heads, float* scratch, std::size_t scratch_floats);

}  // namespace servelab::cuda
