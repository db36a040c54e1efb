// SPDX-License-Identifier: MIT
// Copies that change layout or dtype, one thread per element:
// - gather_rows picks the rows that get logits (the final norm and LM head
//   run on those rows only);
// - narrow_to rounds f32 activations to bf16 (the shared f32_to_bf16, the
//   CPU's conversion) or f16 (CUDA's __float2half_rn), because cuBLAS
//   multiplies 16-bit weights only by 16-bit inputs (see gemm.h).
#include <cuda_fp16.h>

#include "core/dtype.h"
#include "core/error.h"
#include "cuda/elementwise.cuh"
#include "cuda/ops.h"

namespace servelab::cuda {

namespace {

__global__ void gather_rows_kernel(float* out, const float* x, const std::int32_t* rows, std::size_t total, int n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const std::size_t r = i / n, j = i % n;
  out[i] = x[static_cast<std::size_t>(rows[r]) * n + j];
}

__global__ void to_bf16_kernel(std::uint16_t* out, const float* x, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = f32_to_bf16(x[i]);
}

__global__ void to_f16_kernel(__half* out, const float* x, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(x[i]);
}

}  // namespace

void gather_rows(float* out, const float* x, const std::int32_t* rows, int R, int n) {
  const std::size_t total = static_cast<std::size_t>(R) * n;
  launch_per_element("gather_rows_kernel", gather_rows_kernel, total, out, x, rows, total, n);
}

void narrow_to(void* out, DType dtype, const float* x, std::size_t n) {
  check(dtype == DType::BF16 || dtype == DType::F16, "cuda::narrow_to: expected bf16 or f16, got ", dtype_name(dtype));
  if (dtype == DType::BF16)
    launch_per_element("to_bf16_kernel", to_bf16_kernel, n, static_cast<std::uint16_t*>(out), x, n);
  else
    launch_per_element("to_f16_kernel", to_f16_kernel, n, static_cast<__half*>(out), x, n);
}

}  // namespace servelab::cuda
