// SPDX-License-Identifier: MIT
// AVX-512 row kernel and softmax exponentials (compiled with -mavx512f -mavx512bw -mavx512vl -mfma;
// called only after a CPU check).
// Uses intrinsics and plain loops only: no inline library templates, whose
// AVX-512 instantiations could be merged into code that runs on older CPUs.
#include <immintrin.h>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/attention_tile_simd.h"
#include "kernels/cpu/rows.h"
#include "kernels/cpu/rows_tiling.h"
#include "kernels/cpu/silu.h"
#include "kernels/cpu/softmax_exp.h"
#include "kernels/cpu/softmax_exp_simd.h"

namespace servelab::cpu {

namespace {

// The policy rows_tiling.h walks the output with. load() reads 16 inputs or weights at p, widening
// bf16 weights and quantized blocks to f32; the masked forms are for the K % 16 tail only (rows_tiling.h's tile()).
struct Avx512 {
  static constexpr int kMaxInputs = 4;
  static __m512 zero() { return _mm512_setzero_ps(); }
  // 16 bf16 widened to f32: bf16 is the top half of f32.
  static __m512 bf16_to_f32(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 set1(float x) { return _mm512_set1_ps(x); }  // softmax_exp_simd.h
  static void store(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
  static __m512 max(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
  static __m512 round(__m512 v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static __m512 pow2(__m512 n) {  // 2^n for integral n in [-126, 127]: n + 127 in the exponent bits
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static __m512 load(const std::uint16_t* p) {
    return bf16_to_f32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load(const float* p, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, p); }
  static __m512 load(const std::uint16_t* p, __mmask16 mask) { return bf16_to_f32(_mm256_maskz_loadu_epi16(mask, p)); }
  // Quantized blocks, half a block per vector (j is 0 or 16): rows_tiling.h's load_weights().
  static __m512 f16(std::uint16_t h) { return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h))); }
  static __m512 int8s(const std::int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static __m512 nibbles(const std::uint8_t* qs, int j, int offset) {  // low nibbles of the 16 bytes for j < 16
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const __m512i q = _mm512_and_si512(_mm512_srl_epi32(bytes, _mm_cvtsi32_si128(j / 4)), _mm512_set1_epi32(0x0F));
    return _mm512_cvtepi32_ps(_mm512_add_epi32(q, _mm512_set1_epi32(offset)));
  }
  static __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
  static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static __m512 div(__m512 a, __m512 b) { return _mm512_div_ps(a, b); }  // softmax_exp_simd.h
  static __mmask16 tail_mask(int count) { return static_cast<__mmask16>((1u << count) - 1); }
  static __m512 fma(__m512 acc, __m512 w, __m512 x) { return _mm512_fmadd_ps(w, x, acc); }
  static float reduce(__m512 v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace

void rows_avx512(float* out, const float* x, const void* w, DType w_dtype, int M, int N, int K, int n0, int n1) {
  tiling::rows_any<Avx512>(out, x, w, w_dtype, M, N, K, n0, n1);
}

void widen_avx512(float* out, const void* w, DType w_dtype, int K, int n0, int n1) {
  tiling::widen_any<Avx512>(out, w, w_dtype, K, n0, n1);
}

float exp_sum_avx512(float* p, int n, float max) { return tiling::exp_sum<Avx512>(p, n, max); }

void silu_mul_avx512(float* out, const float* gate, const float* up, int n) {
  tiling::silu_mul<Avx512>(out, gate, up, n);
}

void tile_scores_avx512(float* s, int lds, const float* q, int ldq, int rows, const float* k, std::size_t ldk, int n,
                        int D, float scale) {
  tiling::tile_scores<Avx512>(s, lds, q, ldq, rows, k, ldk, n, D, scale);
}

void tile_values_avx512(float* o, int ldo, const float* p, int ldp, int rows, const float* v, std::size_t ldv, int n,
                        int D) {
  tiling::tile_values<Avx512>(o, ldo, p, ldp, rows, v, ldv, n, D);
}

}  // namespace servelab::cpu
