// SPDX-License-Identifier: MIT
/**
 * @file attention_v1_standard.cpp
 * @brief Lab 05's v1, standard attention as the FlashAttention paper's
 *        Algorithm 0 writes it: S = QKᵀ to memory, P = softmax(S) to memory,
 *        O = PV, for the whole [new tokens, keys] matrix of each head.
 *
 * What changed from v0: the dot products move into BLAS (one sgemm for S,
 * one for O per head), so queries share each key while it is in cache.
 * The bottleneck this buys: S and P are written out in full, N × N floats
 * per head (64 MiB at N = 4,096), far past any cache, and read back: once
 * for the max, once for the exponentials and sum, once for O. The bottleneck
 * left: that traffic, which is Θ(N·d + N²) per head, quadratic in N where
 * the output is linear.
 *
 * Two amounts of work (StandardWork). FULL_MATRIX applies the causal mask
 * after the fact, so about half of the sgemms' work is thrown away: it does
 * twice flash's FLOPs, and comparing it with flash mixes two savings.
 * SKIP_MASKED cuts the rows into flash's query tiles (kFlashQueryTile) and
 * scores each only against the keys its last query may see, exactly the
 * pairs v3 computes; S and P still go through memory whole before the next
 * pass reads them. Against it, flash's gain is the traffic alone.
 * What it moves (attention_traffic()): per head Q, K, V, O once (K and V
 * once per tile when skipping), S written once, read twice and P written
 * once (in place) and read once: 4 floats per computed (query, key) pair
 * beyond the paper's N·d terms.
 * @see labs/05_flash_attention/README.md
 */
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/attention_v5_paged.h"
#include "kernels/gemm.h"
#include "kernels/math/attention.h"

namespace servelab {

void attention_standard(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                        const AttentionShape& shape, StandardWork work) {
  use_blas_inside_engine_threads();
  const int H = shape.num_heads, D = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  const int ldq = H * D;
  const float scale = attention_scale(D);
  const bool skip = work == StandardWork::SKIP_MASKED;
  // One item per (sequence, head): its whole S exists before the softmax pass starts, and P before O.
  const std::vector<QueryBlock> items = query_blocks(seqs, H, std::numeric_limits<int>::max());
  ctx.pool->parallel_for(items.size(), [&](std::size_t i0, std::size_t i1) {
    std::vector<float> S;  // [n, keys] S, then P in place: main memory, never a cache's worth
    for (std::size_t i = i0; i < i1; ++i) {
      const AttentionSeq& s = *items[i].seq;
      const int h = items[i].head, kvh = h / group, n = s.num_new_tokens;
      const int keys = s.num_computed_tokens + n;
      const float* qh = q + static_cast<std::size_t>(s.first_row) * ldq + h * D;
      float* oh = out + static_cast<std::size_t>(s.first_row) * ldq + h * D;
      S.resize(static_cast<std::size_t>(n) * keys);
      // Row blocks: the whole matrix at once, or flash's query tiles; the block starting at row b computes
      // keys [0, its_keys(b)), up to its last query's when skipping.
      const int block = skip ? kFlashQueryTile : n;
      const auto its_keys = [&](int b) { return skip ? s.num_computed_tokens + std::min(b + block, n) : keys; };
      // S = Q Kᵀ / sqrt(d) for every (query, key) pair of each block, masked or not.
      for (int b = 0; b < n; b += block) {
        const int rows = std::min(block, n - b);
        for_each_contiguous_run(s.kv, 0, its_keys(b), [&](int t, int run) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, run, D, scale,
                      qh + static_cast<std::size_t>(b) * ldq, ldq, s.kv.key(t) + kvh * D,
                      static_cast<int>(s.kv.row_stride), 0.0f, S.data() + static_cast<std::size_t>(b) * keys + t, keys);
        });
      }
      // Causal mask, then P = softmax(S) row by row, normalised in place; masked scores become 0.
      for (int r = 0; r < n; ++r) {
        float* row = S.data() + static_cast<std::size_t>(r) * keys;
        const int visible = s.num_computed_tokens + r + 1, computed = its_keys(r / block * block);
        const float mx = *std::max_element(row, row + visible);
        float sum = 0.0f;
        for (int t = 0; t < visible; ++t) sum += (row[t] = std::exp(row[t] - mx));
        const float inv = 1.0f / sum;
        for (int t = 0; t < visible; ++t) row[t] *= inv;
        std::fill(row + visible, row + computed, 0.0f);
      }
      // O = P V.
      for (int b = 0; b < n; b += block) {
        const int rows = std::min(block, n - b);
        for_each_contiguous_run(s.kv, 0, its_keys(b), [&](int t, int run) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, run, 1.0f,
                      S.data() + static_cast<std::size_t>(b) * keys + t, keys, s.kv.value(t) + kvh * D,
                      static_cast<int>(s.kv.row_stride), t == 0 ? 0.0f : 1.0f, oh + static_cast<std::size_t>(b) * ldq,
                      ldq);
        });
      }
    }
  });
}

}  // namespace servelab
