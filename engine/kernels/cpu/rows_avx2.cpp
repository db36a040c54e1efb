// SPDX-License-Identifier: MIT
// AVX2 + FMA row kernel (compiled with -mavx2 -mfma; called only after a CPU check).
// Intrinsics and plain loops only, for the same reason as rows_avx512.cpp.
#include <immintrin.h>

#include "kernels/cpu/rows.h"
#include "kernels/cpu/rows_tiling.h"

namespace servelab::cpu {

namespace {

inline __m256 load_w(const float* w, long i) { return _mm256_loadu_ps(w + i); }
inline __m256 load_w(const std::uint16_t* w, long i) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float widen(float v) { return v; }
inline float widen(std::uint16_t v) {
  const __m128i h = _mm_cvtsi32_si128(static_cast<int>(v) << 16);
  return _mm_cvtss_f32(_mm_castsi128_ps(h));
}

// Horizontal sum in a fixed order: high and low halves, then pairs.
inline float reduce(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The policy rows_tiling.h walks the output with: its widest input block and its tile, the same
// scheme as rows_avx512.cpp's, 8 lanes wide.
struct Avx2 {
  static constexpr int kMaxInputs = 2;
  template <int NR, int MR, typename W>
  static void tile(float* out, const float* x, const W* w, int N, int K, int n, int m, bool prefetch) {
    __m256 acc[NR][MR];
    for (int a = 0; a < NR; ++a)
      for (int b = 0; b < MR; ++b) acc[a][b] = _mm256_setzero_ps();
    const int K8 = K & ~7;
    for (int k = 0; k < K8; k += 8) {
      __m256 xv[MR];
      for (int b = 0; b < MR; ++b) xv[b] = _mm256_loadu_ps(x + static_cast<long>(m + b) * K + k);
      for (int a = 0; a < NR; ++a) {
        const long row = static_cast<long>(n + a) * K;
        if (prefetch && k % 16 == 0)  // one prefetch per 64-byte line of f32
          _mm_prefetch(reinterpret_cast<const char*>(w + row + static_cast<long>(tiling::kPrefetchRows) * K + k),
                       _MM_HINT_T2);
        const __m256 wv = load_w(w, row + k);
        for (int b = 0; b < MR; ++b) acc[a][b] = _mm256_fmadd_ps(wv, xv[b], acc[a][b]);
      }
    }
    for (int a = 0; a < NR; ++a)
      for (int b = 0; b < MR; ++b) {
        float s = reduce(acc[a][b]);
        const float* xm = x + static_cast<long>(m + b) * K;
        const W* wn = w + static_cast<long>(n + a) * K;
        for (int k = K8; k < K; ++k) s += xm[k] * widen(wn[k]);  // K % 8 tail, in order
        out[static_cast<long>(m + b) * N + n + a] = s;
      }
  }
};

}  // namespace

void rows_avx2(float* out, const float* x, const void* w, bool w_bf16, int M, int N, int K, int n0, int n1) {
  tiling::rows_f32_or_bf16<Avx2>(out, x, w, w_bf16, M, N, K, n0, n1);
}

}  // namespace servelab::cpu
