// SPDX-License-Identifier: MIT
// Greedy choice: one block per row. Each thread keeps the best of its
// strided share of the row, then the block reduces the candidates with the
// shared argmax_pick(), whose tie rule (lowest index) makes the result the
// same as servelab::argmax() whatever order the tree compares in (a NaN
// never wins; an all-NaN row gives index 0, not the identity's index).
#include "cuda/check.h"
#include "cuda/ops.h"
#include "cuda/reduce.cuh"
#include "kernels/math/argmax.h"

namespace servelab::cuda {

namespace {

__global__ void argmax_kernel(std::int32_t* out, const float* x, int n) {
  const float* row = x + static_cast<std::size_t>(blockIdx.x) * n;  // [n]
  const ArgmaxCandidate none{0.0f, kNoArgmax};                      // loses to every real candidate, NaN included
  ArgmaxCandidate best = none;
  for (int i = threadIdx.x; i < n; i += blockDim.x) best = argmax_pick(best, ArgmaxCandidate{row[i], i});
  best = block_reduce(
      best, [](ArgmaxCandidate a, ArgmaxCandidate b) { return argmax_pick(a, b); }, none);
  if (threadIdx.x == 0) out[blockIdx.x] = best.index < 0 ? 0 : best.index;  // n == 0: 0, as servelab::argmax
}

}  // namespace

void argmax_rows(std::int32_t* out, const float* x, int R, int n) {
  if (R == 0) return;
  argmax_kernel<<<R, kBlockThreads>>>(out, x, n);
  CUDA_CHECK_LAUNCH("argmax_kernel");
}

}  // namespace servelab::cuda
