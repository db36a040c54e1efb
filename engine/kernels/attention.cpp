#include "kernels/attention.h"

#include <cmath>

#include "core/thread_pool.h"

namespace servelab {

void attention_naive(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                     const AttentionShape& shape) {
  const int H = shape.num_heads, D = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // One work item per (sequence token, query head); the list is flattened so threads share it evenly.
  struct Item {
    const AttentionSeq* seq;
    int row, pos;
  };
  std::vector<Item> items;
  for (const auto& s : seqs)
    for (int i = 0; i < s.num_new_tokens; ++i) items.push_back({&s, s.first_row + i, s.num_computed_tokens + i});
  ctx.pool->parallel_for(items.size() * H, [&](std::size_t w0, std::size_t w1) {
    std::vector<float> scores;  // [pos + 1] S = q·Kᵀ / sqrt(d), then P = softmax(S)
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
        float s = 0.0f;
        for (int d = 0; d < D; ++d) s += qh[d] * k[d];
        scores[t] = s * scale;
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
  });
}

}  // namespace servelab
