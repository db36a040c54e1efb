// SPDX-License-Identifier: MIT
// KV write: one block per new token copies its K and V rows into its
// sequence's cache rows, found through the shared KVView::key()/value()
// (contiguous today; a block table when lab 04's paged cache arrives).
// Reads and writes 2 · T · kv_dim floats.
#include "cuda/check.h"
#include "cuda/ops.h"
#include "cuda/reduce.cuh"

namespace servelab::cuda {

namespace {

__global__ void kv_write_kernel(const float* kv_src, std::size_t src_stride, std::size_t k_offset, std::size_t v_offset,
                                const AttentionRow* rows, const KVView* views, int kv_dim) {
  const std::size_t t = blockIdx.x;
  const AttentionRow r = rows[t];
  const KVView view = views[r.seq];
  float* k = view.key(r.pos);    // [kv_dim]
  float* v = view.value(r.pos);  // [kv_dim]
  const float* src = kv_src + t * src_stride;
  for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    k[i] = src[k_offset + i];
    v[i] = src[v_offset + i];
  }
}

}  // namespace

void kv_cache_write(const float* kv_src, std::size_t src_stride, std::size_t k_offset, std::size_t v_offset,
                    const AttentionRow* rows, const KVView* views, int T, int kv_dim) {
  if (T == 0) return;
  kv_write_kernel<<<T, kBlockThreads>>>(kv_src, src_stride, k_offset, v_offset, rows, views, kv_dim);
  CUDA_CHECK_LAUNCH("kv_write_kernel");
}

}  // namespace servelab::cuda
