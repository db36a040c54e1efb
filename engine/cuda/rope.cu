// SPDX-License-Identifier: MIT
// RoPE: one thread per (row, head, pair); each calls the shared
// rope_rotate_pair(), the function the CPU's per-head loop calls. Reads and
// writes the rotated heads once.
#include "cuda/check.h"
#include "cuda/ops.h"
#include "cuda/reduce.cuh"
#include "kernels/math/rope.h"

namespace servelab::cuda {

namespace {

__global__ void rope_kernel(float* x, std::size_t row_stride, const int* positions, int T, int num_heads, int head_dim,
                            const float* inv_freq) {
  const int half = head_dim / 2;
  const std::size_t pairs = static_cast<std::size_t>(T) * num_heads * half;
  const std::size_t item = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= pairs) return;
  const int i = static_cast<int>(item % half);
  const std::size_t head = item / half;  // row * num_heads + h
  const std::size_t t = head / num_heads, h = head % num_heads;
  float* x_head = x + t * row_stride + h * head_dim;  // [head_dim]
  rope_rotate_pair(x_head, half, i, rope_angle(positions[t], inv_freq[i]));
}

}  // namespace

void rope(float* x, std::size_t row_stride, const int* positions, int T, int num_heads, int head_dim,
          const float* inv_freq) {
  const std::size_t pairs = static_cast<std::size_t>(T) * num_heads * (head_dim / 2);
  if (pairs == 0) return;
  rope_kernel<<<blocks_for(pairs, kBlockThreads), kBlockThreads>>>(x, row_stride, positions, T, num_heads, head_dim,
                                                                   inv_freq);
  CUDA_CHECK_LAUNCH("rope_kernel");
}

}  // namespace servelab::cuda
