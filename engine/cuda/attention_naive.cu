// SPDX-License-Identifier: MIT
// Naive causal GQA attention: the GPU twin of attention_naive() in
// kernels/attention.h, and the baseline lab 05's flash attention improves on.
//
// One block per (query head, query row), kAttentionThreads threads:
//   1. S = q·Kᵀ/√d   thread j scores keys j, j + blockDim, ... with the shared
//                     dot() (the CPU's loop, in the same order) and writes them
//                     to S in global memory, updating its own online-softmax
//                     state (max, sum) as it goes;
//   2. m, l          the block merges the threads' states (online_softmax_merge):
//                     the row's max and normaliser after one pass over K;
//   3. P = exp(S - m) overwrites S;
//   4. O = P·V / l    thread d sums over the keys for output column d.
// Memory per (row, head) attending to n keys: K and V rows read once each
// (2·n·head_dim floats; the heads of a GQA group and the rows of a sequence
// each read them again), S written and read, P written and read (4·n floats).
// What is left for lab 05: S and P make a round trip through device memory,
// and K/V are re-read for every query; flash attention keeps a tile in
// shared memory and uses the running state to rescale a partial output.
#include <algorithm>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/ops.h"
#include "cuda/reduce.cuh"
#include "kernels/math/attention.h"

namespace servelab::cuda {

namespace {

constexpr int kAttentionThreads = 128;
constexpr std::size_t kMaxGridY = 65535;  // CUDA's limit on gridDim.y

__global__ void attention_naive_kernel(float* out, const float* q, std::size_t q_stride, const AttentionRow* rows,
                                       const KVView* views, int row0, int H, int group, int D, float scale,
                                       float* scores, int max_keys) {
  extern __shared__ float q_head[];  // [D] this block's query head
  const int h = blockIdx.x, local = blockIdx.y, t = row0 + local;
  const AttentionRow r = rows[t];
  const KVView kv = views[r.seq];
  const int kvh = h / group, n = r.pos + 1;  // causal: keys 0..pos
  for (int d = threadIdx.x; d < D; d += blockDim.x) q_head[d] = q[static_cast<std::size_t>(t) * q_stride + h * D + d];
  __syncthreads();

  float* s = scores + (static_cast<std::size_t>(local) * gridDim.x + h) * max_keys;  // [n] S, then P
  // 1. S = q·Kᵀ / sqrt(d), with a running (max, sum) per thread.
  SoftmaxState state;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float score = dot(q_head, kv.key(j) + kvh * D, D) * scale;
    s[j] = score;
    online_softmax_update(state, score);
  }
  // 2. m = rowmax(S), l = rowsum(exp(S - m)): merge the threads' states.
  state = block_reduce(
      state, [](SoftmaxState a, SoftmaxState b) { return online_softmax_merge(a, b); }, SoftmaxState{});
  // 3. P = exp(S - m); each thread rewrites the scores it wrote.
  for (int j = threadIdx.x; j < n; j += blockDim.x) s[j] = expf(s[j] - state.max);
  __syncthreads();  // P complete and visible to the whole block
  // 4. O = P·V / l, one output column per thread (the CPU's p = P/l, o += p·v).
  const float inv_sum = 1.0f / state.sum;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) acc += (s[j] * inv_sum) * kv.value(j)[kvh * D + d];
    out[(static_cast<std::size_t>(t) * gridDim.x + h) * D + d] = acc;
  }
}

}  // namespace

std::size_t attention_scores_floats(int T, int num_heads, int max_keys) {
  return static_cast<std::size_t>(T) * num_heads * max_keys;
}

void attention_naive(float* out, const float* q, std::size_t q_stride, const AttentionRow* rows, const KVView* views,
                     int T, int max_keys, const AttentionHeads& heads, float* scores, std::size_t scores_floats) {
  const int H = heads.num_heads, D = heads.head_dim;
  check(heads.num_kv_heads > 0 && H % heads.num_kv_heads == 0, "cuda::attention_naive: ", H,
        " query heads do not split into groups of ", heads.num_kv_heads, " KV heads");
  if (T == 0) return;
  const std::size_t per_row = attention_scores_floats(1, H, max_keys);
  check(scores_floats >= per_row, "cuda::attention_naive: ", scores_floats, " floats of score scratch, need ", per_row,
        " for one row");
  const int rows_per_launch =
      static_cast<int>(std::min({scores_floats / per_row, static_cast<std::size_t>(T), kMaxGridY}));
  const float scale = attention_scale(D);
  for (int row0 = 0; row0 < T; row0 += rows_per_launch) {
    const int rows_now = std::min(rows_per_launch, T - row0);
    attention_naive_kernel<<<dim3(H, rows_now), kAttentionThreads, D * sizeof(float)>>>(
        out, q, q_stride, rows, views, row0, H, H / heads.num_kv_heads, D, scale, scores, max_keys);
    CUDA_CHECK_LAUNCH("attention_naive_kernel");
  }
}

}  // namespace servelab::cuda
