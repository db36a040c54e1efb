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

/// Element type of a tensor.
enum class DType { F32, F16, BF16 };

/// Bytes per element of @p dtype.
constexpr std::size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

/// Lower-case name as used in config.json and on the command line ("f32", "f16", "bf16").
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
