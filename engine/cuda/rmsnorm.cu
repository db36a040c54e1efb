// SPDX-License-Identifier: MIT
// RMSNorm: one block per row. The threads split the row's sum of squares,
// the block reduces it (a tree, unlike the CPU's left-to-right sum, so the
// two differ by rounding only), and each thread scales its elements with the
// shared rms_inv_from_sum_sq() and rmsnorm_scale(). Reads the row twice
// (the second time from L1/L2) and the weight once; writes the row.
#include "core/error.h"
#include "cuda/check.h"
#include "cuda/ops.h"
#include "cuda/reduce.cuh"
#include "kernels/math/rmsnorm.h"

namespace servelab::cuda {

namespace {

__global__ void rmsnorm_kernel(float* out, const float* x, const float* weight, int n, float eps) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * n;
  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum_sq += x[base + i] * x[base + i];
  sum_sq = block_reduce(
      sum_sq, [](float a, float b) { return a + b; }, 0.0f);
  const float inv = rms_inv_from_sum_sq(sum_sq, n, eps);
  // Each thread reads and writes the same elements, so out may alias x.
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[base + i] = rmsnorm_scale(x[base + i], inv, weight[i]);
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* weight, int T, int n, float eps) {
  if (T == 0) return;
  rmsnorm_kernel<<<T, kBlockThreads>>>(out, x, weight, n, eps);
  CUDA_CHECK_LAUNCH("rmsnorm_kernel");
}

}  // namespace servelab::cuda
