// SPDX-License-Identifier: MIT
/**
 * @file rows_int8_256.h
 * @brief The integer-dot policy of rows_tiling.h's integer tile() on 256-bit
 *        vectors, shared by the AVX2 and the AVX512_VNNI kernel files.
 *
 * One block of 32 int8 fills a vector. Signed weights use the sign trick,
 * |w| · (x with w's sign), because both instruction sets multiply unsigned
 * by signed bytes. Everything here has internal linkage (an unnamed
 * namespace): each kernel file gets its own copy, compiled for its own
 * instruction set, never merged with the other's.
 */
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "core/quant.h"

namespace servelab::cpu {
namespace {

static_assert(offsetof(BlockQ8Input, s) == offsetof(BlockQ8Input, d) + sizeof(float), "input_scales() loads d, s");

/// Horizontal sum of 8 floats in a fixed order: high and low halves, then pairs.
inline float reduce256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/**
 * @brief The policy, given the instruction set's unsigned × signed byte dot
 *        product (@p Dot::dot(w, x): per int32 lane the sum of four products)
 *        and the widest input block its registers hold.
 */
template <typename Dot, int MaxInputs>
struct Int8Blocks256 {
  static constexpr int kMaxInputs = MaxInputs;
  static __m256 zero() { return _mm256_setzero_ps(); }
  static __m256i inputs(const BlockQ8Input& x) { return int8s(x.qs); }
  static __m256i int8s(const std::int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static __m256i nibbles(const std::uint8_t* qs) {  // low nibbles are elements 0-15, high ones 16-31
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), _mm256_set1_epi8(0x0F));
  }
  static __m256i minus8(__m256i v) { return _mm256_sub_epi8(v, _mm256_set1_epi8(8)); }
  static __m256i dot_unsigned(__m256i w, __m256i x) { return Dot::dot(w, x); }
  static __m256i dot_signed(__m256i w, __m256i x) { return Dot::dot(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)); }
  static __m256 fma(__m256 acc, __m256i dot, __m128 scales) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_broadcastss_ps(scales), acc);
  }
  static float reduce(__m256 v) { return reduce256(v); }
  // The scales, converted from f16 by F16C: one broadcast load and one conversion per block, d and m together.
  static __m128 weight_scales(const BlockQ8_0& b) { return halves(_mm_set1_epi16(static_cast<short>(b.d))); }
  static __m128 weight_scales(const BlockQ4_0& b) { return halves(_mm_set1_epi16(static_cast<short>(b.d))); }
  static __m128 weight_scales(const BlockQ4_1& b) {
    return halves(_mm_set1_epi32(static_cast<int>(b.d | static_cast<std::uint32_t>(b.m) << 16)));
  }
  static __m128 input_scales(const BlockQ8Input& x) {  // [d, s, d, s]: d and s are adjacent floats
    return _mm_castpd_ps(_mm_loaddup_pd(reinterpret_cast<const double*>(&x.d)));
  }
  static __m128 zero_scales() { return _mm_setzero_ps(); }
  static __m128 mul(__m128 a, __m128 b) { return _mm_mul_ps(a, b); }
  static __m128 add(__m128 a, __m128 b) { return _mm_add_ps(a, b); }
  static float second(__m128 v) { return _mm_cvtss_f32(_mm_movehdup_ps(v)); }

 private:
  static __m128 halves(__m128i h) { return _mm_cvtph_ps(h); }
};

}  // namespace
}  // namespace servelab::cpu
