// SPDX-License-Identifier: MIT
/**
 * @file dtype.h
 * @brief Element types of tensors (f32, f16, bf16) and conversions to f32.
 *
 * The engine computes in f32; checkpoints are usually stored in bf16 or f16.
 * The conversions are bit-exact and `SERVELAB_HD`, so a CUDA kernel that
 * upcasts a weight gets the same float as the CPU loader.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/hd.h"

namespace servelab {

/**
 * @brief Element type of a tensor: a float type, or one of llama.cpp's block
 *        formats (core/quant.h), which store each run of 32 elements of a row
 *        as one block of small integers and an f16 scale.
 */
enum class DType { F32, F16, BF16, Q8_0, Q4_0, Q4_1 };

/// True for the block-quantized types (Q8_0, Q4_0, Q4_1).
constexpr bool dtype_is_quantized(DType dtype) {
  return dtype == DType::Q8_0 || dtype == DType::Q4_0 || dtype == DType::Q4_1;
}

/// Elements per block: 32 for the quantized types, 1 for the float types.
constexpr std::int64_t dtype_block_elements(DType dtype) { return dtype_is_quantized(dtype) ? 32 : 1; }

/// Bytes of one block (one element for the float types): Q8_0 34, Q4_0 18, Q4_1 20 (ggml's layouts).
constexpr std::size_t dtype_block_bytes(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Q8_0: return 34;
    case DType::Q4_0: return 18;
    case DType::Q4_1: return 20;
  }
  return 4;
}

/**
 * @brief Bytes per element of a float type. A quantized type has no whole
 *        number of bytes per element: its storage is dtype_nbytes(), and this
 *        returns 1 for it (what a one-element read of it costs, rounded).
 */
constexpr std::size_t dtype_size(DType dtype) { return dtype_is_quantized(dtype) ? 1 : dtype_block_bytes(dtype); }

/// Average bytes per element (Q8_0 1.0625, Q4_1 0.625, f32 4), for counting the bytes a step reads.
constexpr double dtype_bytes_per_element(DType dtype) {
  return static_cast<double>(dtype_block_bytes(dtype)) / static_cast<double>(dtype_block_elements(dtype));
}

/// Storage of @p n elements (a whole number of blocks: @p n is a multiple of dtype_block_elements()).
constexpr std::size_t dtype_nbytes(DType dtype, std::int64_t n) {
  return static_cast<std::size_t>(n / dtype_block_elements(dtype)) * dtype_block_bytes(dtype);
}

/// Lower-case name as used in config.json and on the command line ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1").
std::string_view dtype_name(DType dtype);

/**
 * @brief Parses a dtype from config.json (`float32`, `bfloat16`, `float16`),
 *        safetensors (`F32`, `BF16`, `F16`) or the command line (`f32`, ...).
 * @param text the name; case-insensitive.
 * @param what names the source in the error message (e.g. "config.json field torch_dtype").
 * @throws Error naming @p what and the accepted names when @p text is unknown.
 */
DType parse_dtype(std::string_view text, const std::string& what);

/// Widens a bfloat16 bit pattern to f32 (exact: bf16 is the top half of an f32).
SERVELAB_HD float bf16_to_f32(std::uint16_t bits) {
  std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// Narrows an f32 to bfloat16 with round-to-nearest-even (NaN stays NaN).
SERVELAB_HD std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

/// Narrows @p n floats to bfloat16, f32_to_bf16() each: @p out[i] = f32_to_bf16(@p in[i]).
void f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n);

/**
 * @brief Narrows an f32 to an IEEE half bit pattern with round-to-nearest-even:
 *        subnormal halves included, past 65504 to infinity, NaN stays NaN.
 */
SERVELAB_HD std::uint16_t f32_to_f16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (u >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and up round to infinity
  if (u >= 0x38800000u) {                       // a normal half (2^-14 and up): rebias 127 -> 15, round 23 -> 10 bits
    std::uint32_t v = u - (112u << 23);
    v += 0xfffu + ((v >> 13) & 1u);  // a carry into the exponent is the right rounding
    return static_cast<std::uint16_t>(sign | (v >> 13));
  }
  if (u <= 0x33000000u) return sign;  // up to 2^-25, half the smallest subnormal (a tie goes to 0)
  // A subnormal half counts units of 2^-24: the 24-bit significand shifted right, rounded to nearest even.
  const std::uint32_t mant = (u & 0x7fffffu) | 0x800000u, shift = 126u - (u >> 23);
  std::uint32_t q = mant >> shift;
  const std::uint32_t rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

/// Widens an IEEE half bit pattern to f32 (exact, subnormals and inf/NaN included).
SERVELAB_HD float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t u;
  if (exp == 0x1fu) {
    u = sign | 0x7f800000u | (mant << 13);  // inf or NaN
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (mant << 13);  // normal: rebias 15 -> 127
  } else if (mant == 0) {
    u = sign;  // signed zero
  } else {
    // Subnormal half: shift the mantissa up until its leading 1 is implicit.
    exp = 113u;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    u = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace servelab
