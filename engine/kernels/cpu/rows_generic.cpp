// SPDX-License-Identifier: MIT
// Portable row kernel: eight interleaved partial sums, combined in a fixed tree; and the softmax
// exponentials of softmax_exp.h and the SwiGLU gate of silu.h with libm.
#include <cmath>
#include <cstddef>

#include "core/quant.h"
#include "kernels/cpu/rows.h"
#include "kernels/cpu/silu.h"
#include "kernels/cpu/softmax_exp.h"
#include "kernels/math/rmsnorm.h"

namespace servelab::cpu {

void rows_generic(float* out, const float* x, const void* w, DType w_dtype, int M, int N, int K, int n0, int n1) {
  for (int n = n0; n < n1; ++n) {
    const void* row = static_cast<const std::byte*>(w) + dtype_nbytes(w_dtype, static_cast<long>(n) * K);
    for (int m = 0; m < M; ++m) {
      const float* xm = x + static_cast<long>(m) * K;
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int k = 0;
      for (; k + 8 <= K; k += 8)
        for (int j = 0; j < 8; ++j) acc[j] += xm[k + j] * element_at(w_dtype, row, k + j);
      for (int j = 0; k < K; ++k, ++j) acc[j] += xm[k] * element_at(w_dtype, row, k);
      out[static_cast<long>(m) * N + n] =
          ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
  }
}

namespace {

// One weight row against one input row, a block after another: the exact integer sum of the block's
// products, scaled by d_w·d_x, and Q4_1's m·s apart (the sums rows_tiling.h's integer tile() keeps).
template <typename Block>
float int8_dot(const Block* w, const BlockQ8Input* x, int blocks) {
  float acc = 0.0f, mins = 0.0f;
  for (int b = 0; b < blocks; ++b) {
    int dot = 0;
    for (int j = 0; j < kQuantBlock; ++j) dot += level(w[b], j) * x[b].qs[j];
    acc += static_cast<float>(dot) * (f16_to_f32(w[b].d) * x[b].d);
    if constexpr (requires { w[b].m; }) mins += f16_to_f32(w[b].m) * x[b].s;
  }
  return acc + mins;
}

template <typename Block>
void int8_rows(float* out, const BlockQ8Input* x, const Block* w, int M, int N, int K, int n0, int n1) {
  const int blocks = K / kQuantBlock;
  for (int n = n0; n < n1; ++n)
    for (int m = 0; m < M; ++m)
      out[static_cast<long>(m) * N + n] =
          int8_dot(w + static_cast<long>(n) * blocks, x + static_cast<long>(m) * blocks, blocks);
}

}  // namespace

void rows_int8_generic(float* out, const BlockQ8Input* x, const void* w, DType w_dtype, int M, int N, int K, int n0,
                       int n1) {
  switch (w_dtype) {
    case DType::Q8_0: return int8_rows(out, x, static_cast<const BlockQ8_0*>(w), M, N, K, n0, n1);
    case DType::Q4_0: return int8_rows(out, x, static_cast<const BlockQ4_0*>(w), M, N, K, n0, n1);
    case DType::Q4_1: return int8_rows(out, x, static_cast<const BlockQ4_1*>(w), M, N, K, n0, n1);
    default: break;
  }
}

void widen_generic(float* out, const void* w, DType w_dtype, int K, int n0, int n1) {
  const std::size_t row_bytes = dtype_nbytes(w_dtype, K);
  for (int n = n0; n < n1; ++n, out += K)
    dequantize_row(w_dtype, static_cast<const std::byte*>(w) + static_cast<std::size_t>(n) * row_bytes, out, K);
}

float exp_sum_generic(float* p, int n, float max) {
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - max));
  return sum;
}

void silu_mul_generic(float* out, const float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) out[i] = swiglu(gate[i], up[i]);
}

}  // namespace servelab::cpu
