// SPDX-License-Identifier: MIT
// AVX2 + FMA row kernel (compiled with -mavx2 -mfma; called only after a CPU check).
// Intrinsics and plain loops only, for the same reason as rows_avx512.cpp.
#include <immintrin.h>

#include "kernels/cpu/rows.h"
#include "kernels/cpu/rows_tiling.h"

namespace servelab::cpu {

namespace {

// The policy rows_tiling.h walks the output with: the scheme of rows_avx512.cpp, 8 lanes wide,
// and the K % 8 tail summed one element at a time.
struct Avx2 {
  static constexpr int kMaxInputs = 2;
  static __m256 zero() { return _mm256_setzero_ps(); }
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 load(const std::uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static __m256 fma(__m256 acc, __m256 w, __m256 x) { return _mm256_fmadd_ps(w, x, acc); }
  static float widen(float v) { return v; }
  static float widen(std::uint16_t v) {
    const __m128i h = _mm_cvtsi32_si128(static_cast<int>(v) << 16);
    return _mm_cvtss_f32(_mm_castsi128_ps(h));
  }
  // Horizontal sum in a fixed order: high and low halves, then pairs.
  static float reduce(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

}  // namespace

void rows_avx2(float* out, const float* x, const void* w, bool w_bf16, int M, int N, int K, int n0, int n1) {
  tiling::rows_f32_or_bf16<Avx2>(out, x, w, w_bf16, M, N, K, n0, n1);
}

}  // namespace servelab::cpu
