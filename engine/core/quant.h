// SPDX-License-Identifier: MIT
/**
 * @file quant.h
 * @brief llama.cpp's block-quantized weight formats Q8_0, Q4_0 and Q4_1: the
 *        blocks, the value of one element, and conversions of whole rows.
 *
 * Each run of 32 consecutive elements of a row is one block: an f16 scale d
 * (and for Q4_1 an f16 minimum m) and 32 small integers q.
 *
 * | type | block | element j | bytes per weight |
 * |---|---|---|---|
 * | Q8_0 | d, 32 × int8 | d · q_j | 1.0625 |
 * | Q4_0 | d, 16 bytes of nibbles | d · (q_j − 8) | 0.5625 |
 * | Q4_1 | d, m, 16 bytes of nibbles | q_j · d + m (two roundings, as gguf-py) | 0.625 |
 *
 * In the nibble formats byte i holds element i in its low four bits and
 * element i + 16 in its high four (ggml's order). A decode step reads every
 * weight once, so it moves 3.8× (Q8_0) to 6.4× (Q4_1) fewer bytes than f32.
 *
 * The element values are defined once, here, for the loader, the kernels'
 * reference and the SIMD kernels (which compute the same float in registers,
 * so a quantized matmul equals the f32 one on the dequantized weights bit for
 * bit). Shared with CUDA (SERVELAB_HD).
 */
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/hd.h"

namespace servelab {

class ThreadPool;
struct Tensor;

/// Elements per block of every quantized type.
inline constexpr int kQuantBlock = 32;

/// Q8_0: 32 signed bytes and their scale (34 bytes).
struct BlockQ8_0 {
  std::uint16_t d;              ///< scale, f16 bits
  std::int8_t qs[kQuantBlock];  ///< element j is d · qs[j]
};
/// Q4_0: 32 nibbles, offset by 8, and their scale (18 bytes).
struct BlockQ4_0 {
  std::uint16_t d;  ///< scale, f16 bits
  std::uint8_t
      qs[kQuantBlock / 2];  ///< element j < 16 in the low nibble of qs[j], j ≥ 16 in the high one of qs[j − 16]
};
/// Q4_1: 32 nibbles, a scale and a minimum (20 bytes).
struct BlockQ4_1 {
  std::uint16_t d;                   ///< scale, f16 bits
  std::uint16_t m;                   ///< minimum, f16 bits
  std::uint8_t qs[kQuantBlock / 2];  ///< as BlockQ4_0
};
static_assert(sizeof(BlockQ8_0) == dtype_block_bytes(DType::Q8_0) &&
              sizeof(BlockQ4_0) == dtype_block_bytes(DType::Q4_0) &&
              sizeof(BlockQ4_1) == dtype_block_bytes(DType::Q4_1));

/**
 * @brief 32 inputs (activations) rounded to 8 bits for integer dot products
 *        with quantized weights, as llama.cpp rounds them (its Q8_0 and Q8_1
 *        "vec_dot" types), but with f32 rather than f16 scale and sum (40 bytes).
 *
 * A dot product with a weight block then needs one 32-term integer sum: for
 * Q8_0 weights d_w·d·Σ q_w·q; for Q4_1 weights (q_w·d_w + m) it is
 * d_w·d·Σ q_w·q + m·s, which is why the sum s is kept.
 */
struct alignas(8) BlockQ8Input {  // 8-aligned: kernels load d and s as one 8-byte pair
  float d;                      ///< scale: the block's largest magnitude / 127
  float s;                      ///< d · Σ qs, the block's rounded sum
  std::int8_t qs[kQuantBlock];  ///< input j is about d · qs[j], |qs[j]| ≤ 127
};

/**
 * @brief Rounds @p n inputs (a multiple of 32) to 8 bits per block of 32, as
 *        llama.cpp's quantize_row_q8_0/q8_1 do: d = max|x| / 127, q = round(x / d).
 *        The error of input j is at most d / 2 (plus f32 rounding).
 */
void quantize_inputs(const float* x, BlockQ8Input* out, std::int64_t n);

/// Nibble @p j (0-31) of a 4-bit block.
SERVELAB_HD int nibble(const std::uint8_t* qs, int j) { return j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4; }

/// The integer of element @p j of a Q8_0 block, before scaling: q_j.
SERVELAB_HD int level(const BlockQ8_0& b, int j) { return b.qs[j]; }
/// The integer of element @p j of a Q4_0 block, before scaling: q_j − 8.
SERVELAB_HD int level(const BlockQ4_0& b, int j) { return nibble(b.qs, j) - 8; }
/// The integer of element @p j of a Q4_1 block, before scaling and the minimum: q_j.
SERVELAB_HD int level(const BlockQ4_1& b, int j) { return nibble(b.qs, j); }

/// Element @p j of a Q8_0 block, as every path computes it: level · d.
SERVELAB_HD float dequantize(const BlockQ8_0& b, int j) { return static_cast<float>(level(b, j)) * f16_to_f32(b.d); }
/// Element @p j of a Q4_0 block, as every path computes it: level · d.
SERVELAB_HD float dequantize(const BlockQ4_0& b, int j) { return static_cast<float>(level(b, j)) * f16_to_f32(b.d); }
/// Element @p j of a block, as every path computes it: a product, then a sum (two statements, so no compiler fuses them).
SERVELAB_HD float dequantize(const BlockQ4_1& b, int j) {
  const float scaled = static_cast<float>(level(b, j)) * f16_to_f32(b.d);
  return scaled + f16_to_f32(b.m);
}

/**
 * @brief Element @p k of a row of @p dtype (any dtype): the float every kernel multiplies by.
 * @param row the row's first byte.
 */
float element_at(DType dtype, const void* row, std::int64_t k);

/// Row of @p n elements of @p dtype (any dtype) at @p src, as f32 into @p out.
void dequantize_row(DType dtype, const void* src, float* out, std::int64_t n);

/**
 * @brief Stores @p n floats as @p dtype (f32, bf16 or a quantized type; @p n a
 *        multiple of the block) the way llama.cpp's reference quantizers do:
 *        Q8_0 scales by the block's largest magnitude / 127 and rounds; Q4_0
 *        scales by the signed value of largest magnitude / −8; Q4_1 spans the
 *        block's [min, max] in 15 steps. The scales are stored as f16.
 */
void quantize_row(DType dtype, const float* src, void* dst, std::int64_t n);

/**
 * @brief @p t [rows, cols] (f32, bf16 or quantized) as a new tensor of @p dtype, rows in parallel on @p pool.
 * @throws Error when cols is not a whole number of @p dtype's blocks.
 */
Tensor convert(const Tensor& t, DType dtype, ThreadPool& pool);

}  // namespace servelab
