// SPDX-License-Identifier: MIT
/**
 * @file attention_v3_flash.cpp
 * @brief Lab 05's v3, FlashAttention (Dao et al. 2022; the loop order of
 *        FlashAttention-2, Dao 2023): tiles of Q against tiles of K and V
 *        with the online softmax, so S and P never leave fast memory.
 *
 * What changed from v2: the keys of a query block are taken 64 at a time.
 * Each tile's scores update a running max m, sum l and unnormalised output
 * Õ per row (attention_flash_tile.h), so no row of S is ever complete in
 * memory; causal masking is by tile: tiles past the block's last query are
 * skipped, tiles wholly before its first query need no mask, and only the
 * diagonal tile is masked key by key.
 * The bottleneck removed: the 64 × keys slab of S and P that v2 writes and
 * reads back four times once it outgrows L2. The bottleneck left: K and V
 * are still read once per (query tile, head); GQA heads of one KV group do
 * not share the read (v4 does, for decode), and on the CPU the tile's
 * sgemms are small, so call overhead shows at short contexts (a decode's few
 * rows therefore run on register kernels instead, cpu/attention_tile.h).
 * What it moves (attention_traffic()): per (query tile, head) Q and O once
 * and 2·keys·d floats of K and V, keys stopping at the tile's last query:
 * the paper's Θ(N²d²/M) with M the tile's share of fast memory.
 *
 * Deterministic mode: a row's keys are cut into tiles at absolute positions
 * (multiples of kFlashKeyTile) and each row is computed alone with
 * fixed-order loops, so its output depends only on its query, its position
 * and its keys: the same bits in a prefill, a decode step, a batch of one or
 * of thirty-two, paged or contiguous.
 * @see labs/05_flash_attention/README.md
 */
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/attention_flash_tile.h"
#include "kernels/attention_v5_paged.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/softmax_exp.h"
#include "kernels/gemm.h"

namespace servelab {

void FlashRows::reset(int num_rows, int D) {
  rows = num_rows;
  head_dim = D;
  o.assign(static_cast<std::size_t>(num_rows) * D, 0.0f);
  state.assign(static_cast<std::size_t>(num_rows), SoftmaxState{});
  visible.resize(static_cast<std::size_t>(num_rows));
  s.resize(static_cast<std::size_t>(num_rows) * kFlashKeyTile);
}

void flash_add_key_tile(FlashRows& acc, const float* q, int ldq, const KVView& kv, int kvh, float scale, int t0, int t1,
                        bool exact) {
  const int D = acc.head_dim, n = t1 - t0, ld = static_cast<int>(kv.row_stride);
  const std::size_t off = static_cast<std::size_t>(kvh) * D;
  // A decode's few rows (a GQA group) on register kernels; a query tile's on sgemm (cpu/attention_tile.h).
  const cpu::TileKernels few =
      acc.rows <= cpu::kTileKernelMaxRows && !exact ? cpu::tile_kernels(cpu::active_isa()) : cpu::TileKernels{};
  // S_ij = q_i · k_j / sqrt(d) for the tile's keys (Algorithm 1, line 8).
  if (exact) {
    for (int r = 0; r < acc.rows; ++r)
      for (int j = 0; j < std::min(n, acc.visible[r] - t0); ++j)
        acc.s[static_cast<std::size_t>(r) * kFlashKeyTile + j] =
            dot(q + static_cast<std::size_t>(r) * ldq, kv.key(t0 + j) + off, D) * scale;
  } else if (few.scores != nullptr) {
    for_each_contiguous_run(kv, t0, n, [&](int t, int run) {
      few.scores(acc.s.data() + (t - t0), kFlashKeyTile, q, ldq, acc.rows, kv.key(t) + off, kv.row_stride, run, D,
                 scale);
    });
  } else {
    for_each_contiguous_run(kv, t0, n, [&](int t, int run) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, acc.rows, run, D, scale, q, ldq, kv.key(t) + off, ld, 0.0f,
                  acc.s.data() + (t - t0), kFlashKeyTile);
    });
  }
  // m_new = max(m, rowmax(S)); P = exp(S - m_new); l = e^(m - m_new)·l + rowsum(P); Õ = e^(m - m_new)·Õ (lines 9-10).
  for (int r = 0; r < acc.rows; ++r) {
    float* p = acc.s.data() + static_cast<std::size_t>(r) * kFlashKeyTile;
    const int seen = std::clamp(acc.visible[r] - t0, 0, n);  // keys of this tile row r may see (causal mask)
    if (seen == 0) {
      std::fill(p, p + n, 0.0f);  // a row above the diagonal tile: nothing to add
      continue;
    }
    // BEGIN LAB05 SOLUTION: flash_add_key_tile, the online softmax: new running max, rescale, running sum, rescaled output plus P·V
    SoftmaxState& st = acc.state[static_cast<std::size_t>(r)];
    const float m_new = std::max(st.max, *std::max_element(p, p + seen));
    const float rescale = std::exp(st.max - m_new);  // 0 for the row's first tile (m = -inf)
    // P = e^(S - m_new) and its row sum: libm in exact mode (the rounding the bit-for-bit tests know), else a
    // vector at a time (kernels/cpu/softmax_exp.h).
    const float sum = cpu::exp_sum_kernel(exact ? cpu::Isa::Generic : cpu::active_isa())(p, seen, m_new);
    std::fill(p + seen, p + n, 0.0f);
    st.sum = st.sum * rescale + sum;
    st.max = m_new;
    float* o = acc.o.data() + static_cast<std::size_t>(r) * D;
    if (rescale != 1.0f)
      for (int d = 0; d < D; ++d) o[d] *= rescale;
    if (exact)  // Õ += P·V, one key after another in key order
      for (int j = 0; j < seen; ++j) {
        const float* v = kv.value(t0 + j) + off;
        for (int d = 0; d < D; ++d) o[d] += p[j] * v[d];
      }
    // END LAB05 SOLUTION
  }
  // Õ += P·V_tile (line 10), one product per contiguous run of the tile (register kernels or sgemm, as for S).
  if (few.values != nullptr)
    for_each_contiguous_run(kv, t0, n, [&](int t, int run) {
      few.values(acc.o.data(), D, acc.s.data() + (t - t0), kFlashKeyTile, acc.rows, kv.value(t) + off, kv.row_stride,
                 run, D);
    });
  else if (!exact)
    for_each_contiguous_run(kv, t0, n, [&](int t, int run) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, acc.rows, D, run, 1.0f, acc.s.data() + (t - t0),
                  kFlashKeyTile, kv.value(t) + off, ld, 1.0f, acc.o.data(), D);
    });
}

void flash_write_row(const FlashRows& acc, int r, float* out) {
  // BEGIN LAB05 SOLUTION: flash_write_row, the final divide O = Õ / l (zeros for a row that saw no key)
  const SoftmaxState& st = acc.state[static_cast<std::size_t>(r)];
  const float inv = st.sum > 0.0f ? 1.0f / st.sum : 0.0f;  // O = diag(l)^-1 Õ (line 12)
  const float* o = acc.o.data() + static_cast<std::size_t>(r) * acc.head_dim;
  for (int d = 0; d < acc.head_dim; ++d) out[d] = o[d] * inv;
  // END LAB05 SOLUTION
}

void attention_flash(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                     const AttentionShape& shape) {
  use_blas_inside_engine_threads();
  const std::vector<QueryBlock> items = query_blocks(seqs, shape.num_heads, kFlashQueryTile);
  ctx.pool->parallel_for(items.size(), [&](std::size_t i0, std::size_t i1) {
    thread_local FlashRows acc;  // one query tile's state, reused across calls (no allocation per layer)
    for (std::size_t i = i0; i < i1; ++i) {
      // BEGIN LAB05 SOLUTION: attention_flash, one query tile: what each row may see, the key tiles in order, the rows written
      const QueryBlock& it = items[i];
      const AttentionSeq& s = *it.seq;
      const int D = shape.head_dim, ldq = shape.num_heads * D, group = shape.num_heads / shape.num_kv_heads;
      const std::size_t row0 = static_cast<std::size_t>(s.first_row + it.first);
      const float* qb = q + row0 * ldq + it.head * D;
      acc.reset(it.count, D);
      for (int r = 0; r < it.count; ++r) acc.visible[r] = s.num_computed_tokens + it.first + r + 1;
      // Causal by tile: keys past the tile's last query are never touched (the loop ends there).
      const int keys = acc.visible[it.count - 1];
      for (int t0 = 0; t0 < keys; t0 += kFlashKeyTile)
        flash_add_key_tile(acc, qb, ldq, s.kv, it.head / group, attention_scale(D), t0,
                           std::min(keys, t0 + kFlashKeyTile), ctx.deterministic);
      for (int r = 0; r < it.count; ++r) flash_write_row(acc, r, out + (row0 + r) * ldq + it.head * D);
      // END LAB05 SOLUTION
    }
  });
}

}  // namespace servelab
