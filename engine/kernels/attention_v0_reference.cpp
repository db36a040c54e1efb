// SPDX-License-Identifier: MIT
/**
 * @file attention_v0_reference.cpp
 * @brief Lab 05's v0, the reference: plain loops, obviously right, the
 *        specification every other version is tested against.
 *
 * What it is: for each (query, head), one pass computes the scores of the
 * keys it may see, a second the softmax, a third the weighted sum of values.
 * The bottleneck: every (query, head) reads its keys and values again, so a
 * prefill of N tokens reads K and V N·heads times, and each dot product is
 * one scalar chain (no two queries share a key while it is in cache).
 * What it moves (attention_traffic()): per (query, head) its q, its o, and
 * 2·(p + 1)·d floats of K and V; the score row (p + 1 floats) is assumed to
 * stay in cache. It never writes S to memory, which is why the engine's
 * deterministic mode and decode path used it before lab 05.
 * @see labs/05_flash_attention/README.md
 */
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/math/attention.h"

namespace servelab {

void attention_naive(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                     const AttentionShape& shape) {
  const int H = shape.num_heads, D = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  const float scale = attention_scale(D);
  // One work item per (sequence token, query head); the list is flattened so threads share it evenly.
  struct Item {
    const AttentionSeq* seq;
    int row, pos;
  };
  std::vector<Item> items;
  for (const auto& s : seqs)
    for (int i = 0; i < s.num_new_tokens; ++i) items.push_back({&s, s.first_row + i, s.num_computed_tokens + i});
  std::size_t keys_read = 0;  // a short decode step runs on the calling thread alone
  for (const Item& it : items) keys_read += static_cast<std::size_t>(it.pos + 1) * H;
  const std::size_t min_per_thread = keys_read < 8192 ? items.size() * H : 1;
  ctx.pool->parallel_for(
      items.size() * H,
      [&](std::size_t w0, std::size_t w1) {
        thread_local std::vector<float> scores;  // [pos + 1] S = q·Kᵀ / sqrt(d), then P = softmax(S)
        for (std::size_t w = w0; w < w1; ++w) {
          const Item& it = items[w / H];
          const int h = static_cast<int>(w % H), kvh = h / group;
          const float* qh = q + (static_cast<std::size_t>(it.row) * H + h) * D;
          float* oh = out + (static_cast<std::size_t>(it.row) * H + h) * D;
          const int n = it.pos + 1;  // causal: this query sees tokens 0..pos
          scores.resize(n);
          float max_score = -INFINITY;
          for (int t = 0; t < n; ++t) {
            const float* k = it.seq->kv.key(t) + static_cast<std::size_t>(kvh) * D;
            scores[t] = dot(qh, k, D) * scale;
            max_score = std::max(max_score, scores[t]);
          }
          float sum = 0.0f;
          for (int t = 0; t < n; ++t) sum += (scores[t] = std::exp(scores[t] - max_score));
          const float inv_sum = 1.0f / sum;
          for (int d = 0; d < D; ++d) oh[d] = 0.0f;
          for (int t = 0; t < n; ++t) {
            const float p = scores[t] * inv_sum;
            const float* v = it.seq->kv.value(t) + static_cast<std::size_t>(kvh) * D;
            for (int d = 0; d < D; ++d) oh[d] += p * v[d];
          }
        }
      },
      min_per_thread);
}

}  // namespace servelab
