#include "kernels/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/gemm.h"
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
  ctx.pool->parallel_for(items.size() * H, [&](std::size_t w0, std::size_t w1) {
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
  }, min_per_thread);
}

namespace {

constexpr int kQueryBlock = 64;

// Rows [first, first + count) of a sequence's K (or V) for one KV head, as a
// strided matrix, split where the KV view stops being contiguous (block edges).
template <typename Fn>
void for_each_contiguous_run(const KVView& kv, int first, int count, Fn fn) {
  int t = first;
  while (t < first + count) {
    int run = first + count - t;
    if (kv.block_table != nullptr) run = std::min(run, kv.block_size - t % kv.block_size);
    fn(t, run);
    t += run;
  }
}

}  // namespace

void attention_blocked(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                       const AttentionShape& shape) {
  use_blas_inside_engine_threads();
  const int H = shape.num_heads, D = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  const float scale = attention_scale(D);
  struct Item {
    const AttentionSeq* seq;
    int head, first, count;  // query rows [first, first + count) of the sequence's new tokens
  };
  std::vector<Item> items;
  for (const auto& s : seqs)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < s.num_new_tokens; i += kQueryBlock)
        items.push_back({&s, h, i, std::min(kQueryBlock, s.num_new_tokens - i)});
  const int ldq = H * D;
  ctx.pool->parallel_for(items.size(), [&](std::size_t i0, std::size_t i1) {
    // Per-thread buffers kept across calls: a fresh 100 KB+ allocation per layer
    // goes through mmap and page-faults every time.
    thread_local std::vector<float> scores;  // [count, keys] S, then P
    thread_local std::vector<float> inv_sum;  // [count] 1 / softmax denominator
    for (std::size_t i = i0; i < i1; ++i) {
      const Item& it = items[i];
      const AttentionSeq& s = *it.seq;
      const int kvh = it.head / group;
      const int keys = s.num_computed_tokens + it.first + it.count;  // the block's last query sees this many
      const float* qb = q + static_cast<std::size_t>(s.first_row + it.first) * ldq + it.head * D;
      float* ob = out + static_cast<std::size_t>(s.first_row + it.first) * ldq + it.head * D;
      scores.resize(static_cast<std::size_t>(it.count) * keys);
      // S = Q Kᵀ / sqrt(d), one sgemm per contiguous run of keys.
      for_each_contiguous_run(s.kv, 0, keys, [&](int t, int run) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, it.count, run, D, scale, qb, ldq,
                    s.kv.key(t) + kvh * D, static_cast<int>(s.kv.row_stride), 0.0f, scores.data() + t, keys);
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

void attention(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
               const AttentionShape& shape) {
  int longest = 0;
  for (const auto& s : seqs) longest = std::max(longest, s.num_new_tokens);
  if (ctx.deterministic || longest < 16)
    attention_naive(ctx, out, q, seqs, shape);
  else
    attention_blocked(ctx, out, q, seqs, shape);
}

}  // namespace servelab
