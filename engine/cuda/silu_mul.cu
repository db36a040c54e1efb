// SPDX-License-Identifier: MIT
// SwiGLU gating: one thread per output element calls the shared swiglu().
// Reads T · 2F floats, writes T · F.
#include "cuda/elementwise.cuh"
#include "cuda/ops.h"
#include "kernels/math/rmsnorm.h"

namespace servelab::cuda {

namespace {

__global__ void silu_mul_kernel(float* out, const float* gate_up, std::size_t n, int F) {
  const std::size_t idx = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const std::size_t t = idx / F, i = idx % F;
  const float* row = gate_up + t * 2 * F;  // [gate (F) | up (F)]
  out[idx] = swiglu(row[i], row[F + i]);
}

}  // namespace

void silu_mul(float* out, const float* gate_up, int T, int F) {
  const std::size_t n = static_cast<std::size_t>(T) * F;
  launch_per_element("silu_mul_kernel", silu_mul_kernel, n, out, gate_up, n, F);
}

}  // namespace servelab::cuda
