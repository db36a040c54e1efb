// SPDX-License-Identifier: MIT
// AVX2 + FMA row kernel and softmax exponentials (compiled with -mavx2 -mfma -mf16c; called only after a CPU check).
// Intrinsics and plain loops only, for the same reason as rows_avx512.cpp.
#include <immintrin.h>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/attention_tile_simd.h"
#include "kernels/cpu/rows.h"
#include "kernels/cpu/rows_int8_256.h"
#include "kernels/cpu/rows_tiling.h"
#include "kernels/cpu/silu.h"
#include "kernels/cpu/softmax_exp.h"
#include "kernels/cpu/softmax_exp_simd.h"

namespace servelab::cpu {

namespace {

// The policy rows_tiling.h walks the output with: the scheme of rows_avx512.cpp, 8 lanes wide,
// and the K % 8 tail summed one element at a time. Quantized blocks are read a quarter at a time (r.j = 0, 8, 16, 24).
// Three inputs per tile: 12 accumulators, 3 inputs and a weight fill the 16 registers. Against two
// (8 accumulators), a batch of 16 decodes multiplied SmolLM2-135M's 30 layers in 0.88-0.91× the
// time and a batch of 32 in 0.78-0.89× (2-vCPU Zen 3, 2 threads, three alternating runs).
struct Avx2 {
  static constexpr int kMaxInputs = 3;
  static __m256 zero() { return _mm256_setzero_ps(); }
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 set1(float x) { return _mm256_set1_ps(x); }  // softmax_exp_simd.h
  static void store(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
  static __m256 max(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
  static __m256 round(__m256 v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static __m256 pow2(__m256 n) {  // 2^n for integral n in [-126, 127]: n + 127 in the exponent bits
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static __m256 load(const std::uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static __m256 f16(std::uint16_t h) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))); }  // F16C
  static __m256 int8s(const std::int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static __m256 nibbles(const std::uint8_t* qs, int j, int offset) {  // bytes j % 16 .. + 7; high nibbles for j ≥ 16
    const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + (j & 15))));
    const __m256i q =
        _mm256_and_si256(_mm256_srl_epi32(bytes, _mm_cvtsi32_si128((j >> 4) * 4)), _mm256_set1_epi32(0x0F));
    return _mm256_cvtepi32_ps(_mm256_add_epi32(q, _mm256_set1_epi32(offset)));
  }
  static __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
  static __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m256 div(__m256 a, __m256 b) { return _mm256_div_ps(a, b); }  // softmax_exp_simd.h
  static __m256 fma(__m256 acc, __m256 w, __m256 x) { return _mm256_fmadd_ps(w, x, acc); }
  static float widen(float v) { return v; }
  static float widen(std::uint16_t v) {
    const __m128i h = _mm_cvtsi32_si128(static_cast<int>(v) << 16);
    return _mm_cvtss_f32(_mm_castsi128_ps(h));
  }
  static float reduce(__m256 v) { return reduce256(v); }
};

// The integer-dot policy: vpmaddubsw multiplies unsigned by signed bytes and adds pairs into int16
// (at most 2 · 128 · 127, no saturation), vpmaddwd adds pairs of those into int32. Two inputs per
// tile, as the f32 policy: 8 accumulators of 16 registers.
struct MaddubsDot {
  static __m256i dot(__m256i w, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
  }
};

}  // namespace

void rows_int8_avx2(float* out, const BlockQ8Input* x, const void* w, DType w_dtype, int M, int N, int K, int n0,
                    int n1) {
  tiling::rows_any<Int8Blocks256<MaddubsDot, 2>>(out, x, w, w_dtype, M, N, K, n0, n1);
}

void rows_avx2(float* out, const float* x, const void* w, DType w_dtype, int M, int N, int K, int n0, int n1) {
  tiling::rows_any<Avx2>(out, x, w, w_dtype, M, N, K, n0, n1);
}

void widen_avx2(float* out, const void* w, DType w_dtype, int K, int n0, int n1) {
  tiling::widen_any<Avx2>(out, w, w_dtype, K, n0, n1);
}

float exp_sum_avx2(float* p, int n, float max) { return tiling::exp_sum<Avx2>(p, n, max); }

void silu_mul_avx2(float* out, const float* gate, const float* up, int n) { tiling::silu_mul<Avx2>(out, gate, up, n); }

void tile_scores_avx2(float* s, int lds, const float* q, int ldq, int rows, const float* k, std::size_t ldk, int n,
                      int D, float scale) {
  tiling::tile_scores<Avx2>(s, lds, q, ldq, rows, k, ldk, n, D, scale);
}

void tile_values_avx2(float* o, int ldo, const float* p, int ldp, int rows, const float* v, std::size_t ldv, int n,
                      int D) {
  tiling::tile_values<Avx2>(o, ldo, p, ldp, rows, v, ldv, n, D);
}

}  // namespace servelab::cpu
