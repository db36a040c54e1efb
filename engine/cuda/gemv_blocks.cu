// SPDX-License-Identifier: MIT
// Decode GEMV on quantized weights (Q8_0, Q4_0, Q4_1 blocks of core/quant.h),
// the GPU twin of the CPU's widening row kernels: each weight is widened in
// registers by the same dequantize() the CPU uses and multiplied by an f32
// input, so a decode step reads the blocks (1.06 or 0.56-0.63 bytes per
// weight) rather than a dequantized copy. One warp per weight row: its 32
// lanes take the row's blocks in turn, each lane a whole block (its 34 or 18-20
// bytes, read once for every input row), then a shuffle tree sums the lanes.
#include <cstdint>

#include "core/error.h"
#include "core/quant.h"
#include "cuda/check.h"
#include "cuda/ops.h"

namespace servelab::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxInputs = 8;  // input rows per launch: a decode batch, a warp's registers

template <typename Block>
__global__ void gemv_blocks_kernel(float* out, const float* x, const Block* w, int M, int N, int K) {
  const int lane = threadIdx.x % 32;
  const int n = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  if (n >= N) return;
  const int blocks = K / kQuantBlock;
  const Block* row = w + static_cast<std::size_t>(n) * blocks;
  float sum[kMaxInputs] = {};
  for (int b = lane; b < blocks; b += 32) {
    const Block blk = row[b];
    for (int j = 0; j < kQuantBlock; ++j) {
      const float v = dequantize(blk, j);
      for (int m = 0; m < M; ++m) sum[m] += v * x[static_cast<std::size_t>(m) * K + b * kQuantBlock + j];
    }
  }
  for (int m = 0; m < M; ++m) {
    float s = sum[m];
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (lane == 0) out[static_cast<std::size_t>(m) * N + n] = s;
  }
}

template <typename Block>
void launch(float* out, const float* x, const Tensor& w, int M, int N, int K) {
  const int grid = (N + kWarpsPerBlock - 1) / kWarpsPerBlock;
  for (int m0 = 0; m0 < M; m0 += kMaxInputs) {
    const int rows = M - m0 < kMaxInputs ? M - m0 : kMaxInputs;
    gemv_blocks_kernel<Block><<<grid, kWarpsPerBlock * 32>>>(
        out + static_cast<std::size_t>(m0) * N, x + static_cast<std::size_t>(m0) * K, w.as<const Block>(), rows, N, K);
    CUDA_CHECK_LAUNCH("gemv_blocks_kernel");
  }
}

}  // namespace

void matmul_blocks(float* out, const float* x, const Tensor& w, int M) {
  check(w.device == Device::CUDA && w.shape.size() == 2,
        "cuda::matmul_blocks: the weights must be a matrix in device memory");
  const int N = static_cast<int>(w.shape[0]), K = static_cast<int>(w.shape[1]);
  check(K % kQuantBlock == 0, "cuda::matmul_blocks: rows of ", K, " elements are not whole blocks of 32");
  if (M == 0 || N == 0) return;
  switch (w.dtype) {
    case DType::Q8_0: return launch<BlockQ8_0>(out, x, w, M, N, K);
    case DType::Q4_0: return launch<BlockQ4_0>(out, x, w, M, N, K);
    case DType::Q4_1: return launch<BlockQ4_1>(out, x, w, M, N, K);
    default: fail("cuda::matmul_blocks: weights must be q8_0, q4_0 or q4_1, got ", dtype_name(w.dtype));
  }
}

}  // namespace servelab::cuda
