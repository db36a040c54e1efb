// SPDX-License-Identifier: MIT
#include "core/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace servelab {

namespace {

template <typename Block>
float block_element(const void* row, std::int64_t k) {
  return dequantize(static_cast<const Block*>(row)[k / kQuantBlock], static_cast<int>(k % kQuantBlock));
}

std::uint16_t bits_at(const void* row, std::int64_t k) {
  std::uint16_t bits;
  std::memcpy(&bits, static_cast<const std::byte*>(row) + 2 * k, 2);  // a GGUF's f16 rows need not be aligned
  return bits;
}

// The 4-bit formats' common step: q = clamp(trunc((x - min) / d + 0.5)) into nibbles.
void pack_nibbles(const float* x, float min, float inverse, std::uint8_t* qs) {
  auto q = [&](float v) {
    return static_cast<std::uint8_t>(std::min(15, static_cast<int>((v - min) * inverse + 0.5f)));
  };
  for (int j = 0; j < kQuantBlock / 2; ++j) qs[j] = static_cast<std::uint8_t>(q(x[j]) | (q(x[j + 16]) << 4));
}

void quantize_block(const float* x, BlockQ8_0& b) {
  float amax = 0.0f;
  for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  for (int j = 0; j < kQuantBlock; ++j) b.qs[j] = static_cast<std::int8_t>(std::lround(x[j] * inverse));
}

void quantize_block(const float* x, BlockQ4_0& b) {
  float extreme = 0.0f;  // the signed value of largest magnitude maps to -8, so the range [-8, 7] is used whole
  for (int j = 0; j < kQuantBlock; ++j)
    if (std::fabs(x[j]) > std::fabs(extreme)) extreme = x[j];
  const float d = extreme / -8.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  pack_nibbles(x, -8.0f * d, inverse, b.qs);  // (x / d + 8) = (x - (-8 d)) / d
}

void quantize_block(const float* x, BlockQ4_1& b) {
  const auto [lo, hi] = std::minmax_element(x, x + kQuantBlock);
  const float d = (*hi - *lo) / 15.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  b.m = f32_to_f16(*lo);
  pack_nibbles(x, *lo, inverse, b.qs);
}

template <typename Block>
void quantize_blocks(const float* src, void* dst, std::int64_t n) {
  auto* blocks = static_cast<Block*>(dst);
  for (std::int64_t b = 0; b < n / kQuantBlock; ++b) quantize_block(src + b * kQuantBlock, blocks[b]);
}

template <typename Block>
void dequantize_blocks(const Block* blocks, float* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / kQuantBlock; ++b)
    for (int j = 0; j < kQuantBlock; ++j) out[b * kQuantBlock + j] = dequantize(blocks[b], j);
}

}  // namespace

float element_at(DType dtype, const void* row, std::int64_t k) {
  switch (dtype) {
    case DType::F32: return static_cast<const float*>(row)[k];
    case DType::F16: return f16_to_f32(bits_at(row, k));
    case DType::BF16: return bf16_to_f32(bits_at(row, k));
    case DType::Q8_0: return block_element<BlockQ8_0>(row, k);
    case DType::Q4_0: return block_element<BlockQ4_0>(row, k);
    case DType::Q4_1: return block_element<BlockQ4_1>(row, k);
  }
  return 0.0f;
}

void dequantize_row(DType dtype, const void* src, float* out, std::int64_t n) {
  switch (dtype) {
    case DType::F32: std::memcpy(out, src, static_cast<std::size_t>(n) * sizeof(float)); return;
    case DType::BF16:
      for (std::int64_t k = 0; k < n; ++k) out[k] = bf16_to_f32(bits_at(src, k));
      return;
    // A block at a time, so the loop over its 32 elements has no dtype switch in it (widen_generic() runs it).
    case DType::Q8_0: return dequantize_blocks(static_cast<const BlockQ8_0*>(src), out, n);
    case DType::Q4_0: return dequantize_blocks(static_cast<const BlockQ4_0*>(src), out, n);
    case DType::Q4_1: return dequantize_blocks(static_cast<const BlockQ4_1*>(src), out, n);
    default:
      for (std::int64_t k = 0; k < n; ++k) out[k] = element_at(dtype, src, k);
  }
}

void quantize_row(DType dtype, const float* src, void* dst, std::int64_t n) {
  switch (dtype) {
    case DType::F32: std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float)); return;
    case DType::BF16: f32_to_bf16(src, static_cast<std::uint16_t*>(dst), static_cast<std::size_t>(n)); return;
    case DType::F16:
      for (std::int64_t k = 0; k < n; ++k) static_cast<std::uint16_t*>(dst)[k] = f32_to_f16(src[k]);
      return;
    case DType::Q8_0: return quantize_blocks<BlockQ8_0>(src, dst, n);
    case DType::Q4_0: return quantize_blocks<BlockQ4_0>(src, dst, n);
    case DType::Q4_1: return quantize_blocks<BlockQ4_1>(src, dst, n);
  }
}

void quantize_inputs(const float* x, BlockQ8Input* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < kQuantBlock; ++j) {
      // lround's rounding (half away from zero) without the library call, which kept this loop scalar. The
      // clamp keeps the cast defined where 1 / d overflowed (a block of subnormals); a NaN input becomes 0.
      const float scaled = xb[j] * inverse;
      const float v = scaled == scaled ? std::clamp(scaled, -127.0f, 127.0f) : 0.0f;
      const int whole = static_cast<int>(v);
      const float fraction = v - static_cast<float>(whole);
      const int q = whole + (fraction >= 0.5f) - (fraction <= -0.5f);
      out[b].qs[j] = static_cast<std::int8_t>(q);
      sum += q;
    }
    out[b].d = d;
    out[b].s = d * static_cast<float>(sum);
  }
}

Tensor convert(const Tensor& t, DType dtype, ThreadPool& pool) {
  const std::int64_t cols = t.shape.back(), rows = t.numel() / std::max<std::int64_t>(cols, 1);
  check(cols % dtype_block_elements(dtype) == 0, "a ", shape_to_string(t.shape), " tensor cannot be stored as ",
        dtype_name(dtype), ": its rows are not whole blocks of ", dtype_block_elements(dtype), " elements");
  Tensor out = Tensor::zeros(dtype, t.shape);
  const std::size_t in_row = dtype_nbytes(t.dtype, cols), out_row = dtype_nbytes(dtype, cols);
  pool.parallel_for(
      static_cast<std::size_t>(rows),
      [&](std::size_t begin, std::size_t end) {
        std::vector<float> row(static_cast<std::size_t>(cols));
        for (std::size_t r = begin; r < end; ++r) {
          dequantize_row(t.dtype, static_cast<const std::byte*>(t.data) + r * in_row, row.data(), cols);
          quantize_row(dtype, row.data(), static_cast<std::byte*>(out.data) + r * out_row, cols);
        }
      },
      64);
  return out;
}

}  // namespace servelab
