// SPDX-License-Identifier: MIT
/**
 * @file attention_flash_tile.h
 * @brief The step flash attention repeats: a tile of query rows takes in a
 *        tile of keys with the online softmax (shared by v3 and v4).
 *
 * Rows carry FlashAttention-2's running state (Dao 2023, Algorithm 1): the
 * max m, the sum l and the unnormalised output Õ = Σ e^{s - m} v. One key
 * tile updates them; after the last tile O = Õ / l.
 * @verbatim
 *  rows (queries or GQA heads)   keys t0 ........ t1         state per row
 *  q [rows, D] --> S = q·K_tileᵀ [rows, t1 - t0] --> P --> Õ [rows, D], m, l
 *                  (one tile, never the whole row)
 * @endverbatim
 */
#pragma once

#include <vector>

#include "kernels/math/attention.h"
#include "kv/kv_view.h"

namespace servelab {

/// The running state of a tile of query rows (FlashAttention-2's m, l and Õ).
struct FlashRows {
  int rows = 0;                     ///< query rows in the tile
  int head_dim = 0;                 ///< D
  std::vector<float> o;             ///< [rows, D] Õ = Σ e^{s - m} v, not yet divided by l
  std::vector<SoftmaxState> state;  ///< [rows] m and l
  std::vector<int> visible;         ///< [rows] row r may see keys [0, visible[r]) (causal)
  std::vector<float> s;             ///< [rows, kFlashKeyTile] S of the current tile, then P

  /// Empties the state for @p num_rows rows of width @p D (no keys seen: m = -inf, l = 0, Õ = 0).
  void reset(int num_rows, int D);
};

/**
 * @brief Adds keys [t0, t1) of KV head @p kvh to the rows' state; keys a row
 *        may not see are masked.
 *
 * For each row r, with s_j = scale · q_r · k_j over the n = clamp(visible[r]
 * − t0, 0, t1 − t0) keys it may see (the online softmax, lab 05):
 * m' = max(m, max_j s_j); P_j = e^{s_j − m'} (0 for a masked key; libm's
 * expf in exact mode, else kernels/cpu/softmax_exp.h's vector exponential);
 * l ← e^{m − m'}·l + Σ_j P_j; Õ ← e^{m − m'}·Õ + Σ_j P_j v_j; m ← m'.
 * On a row's first tile m = −∞, so e^{m − m'} = 0 and the empty state adds
 * nothing; a row with n = 0 is left unchanged. No error is raised: the
 * caller guarantees t0 < t1 and keys that exist in @p kv.
 * @param q      [rows, ldq] query rows (row r at q + r·ldq), RoPE applied.
 * @param t1     at most t0 + kFlashKeyTile.
 * @param exact  true: fixed-order scalar loops, each row computed alone
 *               (deterministic mode); false: two sgemms per contiguous run.
 */
void flash_add_key_tile(FlashRows& acc, const float* q, int ldq, const KVView& kv, int kvh, float scale, int t0, int t1,
                        bool exact);

/**
 * @brief The last step of the online softmax for row @p r: out[d] = Õ[r, d] / l_r
 *        for d in [0, head_dim) (FlashAttention-2's O = diag(l)⁻¹ Õ, line 12).
 *
 * A row that saw no key (l = 0) gets zeros rather than 0/0. The state is
 * not changed.
 * @param out [head_dim] the row's output, written (not accumulated).
 */
void flash_write_row(const FlashRows& acc, int r, float* out);

}  // namespace servelab
