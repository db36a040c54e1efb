// SPDX-License-Identifier: MIT
// Element-wise adds: the residual connection (x += y) and the q/k/v bias
// (a row vector added to every row). One thread per element.
#include "cuda/elementwise.cuh"
#include "cuda/ops.h"

namespace servelab::cuda {

namespace {

__global__ void add_inplace_kernel(float* x, const float* y, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

__global__ void add_bias_kernel(float* out, const float* bias, std::size_t n, int N) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] += bias[i % N];
}

}  // namespace

void add_inplace(float* x, const float* y, std::size_t n) {
  launch_per_element("add_inplace_kernel", add_inplace_kernel, n, x, y, n);
}

void add_bias(float* out, const float* bias, int M, int N) {
  const std::size_t n = static_cast<std::size_t>(M) * N;
  launch_per_element("add_bias_kernel", add_bias_kernel, n, out, bias, n, N);
}

}  // namespace servelab::cuda
