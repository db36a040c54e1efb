// SPDX-License-Identifier: MIT
/**
 * @file attention_v2_blocked.cpp
 * @brief Lab 05's v2, blocked attention: a block of 64 queries of one head
 *        against all the keys it may see, through two sgemms.
 *
 * What changed from v1: the queries are cut into blocks of 64, and the keys
 * stop at the block's last query (causal by block), so S is a 64 × keys
 * slab instead of N × N. The bottleneck removed: S and P of a block fit in
 * L2 up to a few thousand keys, and K is read once per block instead of
 * once per query (v0). The bottleneck left: past that, the slab spills, and
 * K and V are still read once per query block and head; the whole score row
 * exists before the softmax can start.
 * What it moves (attention_traffic()): per (query block, head) the block's
 * Q and O and 2·keys·d floats of K and V; plus 4 passes over S when the
 * 64 × keys slab exceeds the fast memory M.
 * @see labs/05_flash_attention/README.md
 */
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/attention_traffic.h"
#include "kernels/attention_v5_paged.h"
#include "kernels/gemm.h"
#include "kernels/math/attention.h"

namespace servelab {

void attention_blocked(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                       const AttentionShape& shape) {
  use_blas_inside_engine_threads();
  const int H = shape.num_heads, D = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  const float scale = attention_scale(D);
  const std::vector<QueryBlock> items = query_blocks(seqs, H, kBlockedQueryBlock);
  const int ldq = H * D;
  ctx.pool->parallel_for(items.size(), [&](std::size_t i0, std::size_t i1) {
    // Per-thread buffers kept across calls: a fresh 100 KB+ allocation per layer
    // goes through mmap and page-faults every time.
    thread_local std::vector<float> scores;   // [count, keys] S, then P
    thread_local std::vector<float> inv_sum;  // [count] 1 / softmax denominator
    for (std::size_t i = i0; i < i1; ++i) {
      const QueryBlock& it = items[i];
      const AttentionSeq& s = *it.seq;
      const int kvh = it.head / group;
      const int keys = s.num_computed_tokens + it.first + it.count;  // the block's last query sees this many
      const float* qb = q + static_cast<std::size_t>(s.first_row + it.first) * ldq + it.head * D;
      float* ob = out + static_cast<std::size_t>(s.first_row + it.first) * ldq + it.head * D;
      scores.resize(static_cast<std::size_t>(it.count) * keys);
      // S = Q Kᵀ / sqrt(d), one sgemm per contiguous run of keys.
      for_each_contiguous_run(s.kv, 0, keys, [&](int t, int run) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, it.count, run, D, scale, qb, ldq, s.kv.key(t) + kvh * D,
                    static_cast<int>(s.kv.row_stride), 0.0f, scores.data() + t, keys);
      });
      // Causal softmax of each row over the keys its query may see: P = softmax(S).
      inv_sum.resize(it.count);
      for (int r = 0; r < it.count; ++r) {
        float* row = scores.data() + static_cast<std::size_t>(r) * keys;
        const int visible = s.num_computed_tokens + it.first + r + 1;
        const float mx = *std::max_element(row, row + visible);
        float sum = 0.0f;
        for (int t = 0; t < visible; ++t) sum += (row[t] = std::exp(row[t] - mx));
        std::fill(row + visible, row + keys, 0.0f);
        inv_sum[r] = 1.0f / sum;
      }
      // O = P V, accumulated over the runs, then each row divided by its softmax sum.
      for_each_contiguous_run(s.kv, 0, keys, [&](int t, int run) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, it.count, D, run, 1.0f, scores.data() + t, keys,
                    s.kv.value(t) + kvh * D, static_cast<int>(s.kv.row_stride), t == 0 ? 0.0f : 1.0f, ob, ldq);
      });
      for (int r = 0; r < it.count; ++r)
        for (int d = 0; d < D; ++d) ob[static_cast<std::size_t>(r) * ldq + d] *= inv_sum[r];
    }
  });
}

}  // namespace servelab
