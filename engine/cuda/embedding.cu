// SPDX-License-Identifier: MIT
// Embedding lookup: one block per token copies its row of the table,
// widening bf16 with the same bf16_to_f32 the CPU uses. Reads T rows of the
// table (T · hidden · 2 or 4 bytes), writes T · hidden · 4 bytes.
#include "core/dtype.h"
#include "core/error.h"
#include "cuda/check.h"
#include "cuda/ops.h"
#include "cuda/reduce.cuh"

namespace servelab::cuda {

namespace {

__device__ float widen(float x) { return x; }
__device__ float widen(std::uint16_t bits) { return bf16_to_f32(bits); }

template <typename W>
__global__ void embedding_kernel(float* out, const W* table, const std::int32_t* ids, int H) {
  const std::size_t t = blockIdx.x;
  const W* row = table + static_cast<std::size_t>(ids[t]) * H;  // [hidden]
  for (int i = threadIdx.x; i < H; i += blockDim.x) out[t * H + i] = widen(row[i]);
}

}  // namespace

void embedding_lookup(float* out, const Tensor& table, const std::int32_t* ids, int T) {
  check(table.device == Device::CUDA && (table.dtype == DType::F32 || table.dtype == DType::BF16),
        "cuda::embedding_lookup: the table must be f32 or bf16 in device memory");
  if (T == 0) return;
  const int H = static_cast<int>(table.shape[1]);
  if (table.dtype == DType::F32)
    embedding_kernel<<<T, kBlockThreads>>>(out, table.as<const float>(), ids, H);
  else
    embedding_kernel<<<T, kBlockThreads>>>(out, table.as<const std::uint16_t>(), ids, H);
  CUDA_CHECK_LAUNCH("embedding_kernel");
}

}  // namespace servelab::cuda
