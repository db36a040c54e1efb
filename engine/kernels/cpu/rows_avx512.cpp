// SPDX-License-Identifier: MIT
// AVX-512 row kernel (compiled with -mavx512f -mavx512bw -mavx512vl -mfma; called only after a CPU check).
// Uses intrinsics and plain loops only: no inline library templates, whose
// AVX-512 instantiations could be merged into code that runs on older CPUs.
#include <immintrin.h>

#include "kernels/cpu/rows.h"
#include "kernels/cpu/rows_tiling.h"

namespace servelab::cpu {

namespace {

// 16 weights starting at w + i, widened to f32. The masked forms are for the K % 16 tail only:
// masked loads in the main loop cost a third of the bandwidth on the machines we measured.
inline __m512 load_w(const float* w, long i) { return _mm512_loadu_ps(w + i); }
inline __m512 load_w(const std::uint16_t* w, long i) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // bf16 is the top half of f32
}
inline __m512 load_w(const float* w, long i, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, w + i); }
inline __m512 load_w(const std::uint16_t* w, long i, __mmask16 mask) {
  const __m256i h = _mm256_maskz_loadu_epi16(mask, w + i);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// The policy rows_tiling.h walks the output with: its widest input block and its tile.
// out[m..m+MR)[n..n+NR): MR inputs against NR weight rows, one accumulator per
// dot product, K walked in the same order for every tile shape. `prefetch`
// says whether the rows tiling::kPrefetchRows ahead exist: they are fetched
// while this tile computes, because the hardware prefetcher alone ramps up
// too slowly on rows of a few KB.
struct Avx512 {
  static constexpr int kMaxInputs = 4;
  template <int NR, int MR, typename W>
  static void tile(float* out, const float* x, const W* w, int N, int K, int n, int m, bool prefetch) {
    __m512 acc[NR][MR];
    for (int a = 0; a < NR; ++a)
      for (int b = 0; b < MR; ++b) acc[a][b] = _mm512_setzero_ps();
    const int K16 = K & ~15;
    for (int k = 0; k < K16; k += 16) {
      __m512 xv[MR];
      for (int b = 0; b < MR; ++b) xv[b] = _mm512_loadu_ps(x + static_cast<long>(m + b) * K + k);
      for (int a = 0; a < NR; ++a) {
        const long row = static_cast<long>(n + a) * K;
        if (prefetch)
          _mm_prefetch(reinterpret_cast<const char*>(w + row + static_cast<long>(tiling::kPrefetchRows) * K + k),
                       _MM_HINT_T2);
        const __m512 wv = load_w(w, row + k);
        for (int b = 0; b < MR; ++b) acc[a][b] = _mm512_fmadd_ps(wv, xv[b], acc[a][b]);
      }
    }
    if (K16 < K) {
      const __mmask16 mask = static_cast<__mmask16>((1u << (K - K16)) - 1);
      __m512 xv[MR];
      for (int b = 0; b < MR; ++b) xv[b] = _mm512_maskz_loadu_ps(mask, x + static_cast<long>(m + b) * K + K16);
      for (int a = 0; a < NR; ++a) {
        const __m512 wv = load_w(w, static_cast<long>(n + a) * K + K16, mask);
        for (int b = 0; b < MR; ++b) acc[a][b] = _mm512_fmadd_ps(wv, xv[b], acc[a][b]);
      }
    }
    for (int a = 0; a < NR; ++a)
      for (int b = 0; b < MR; ++b) out[static_cast<long>(m + b) * N + n + a] = _mm512_reduce_add_ps(acc[a][b]);
  }
};

}  // namespace

void rows_avx512(float* out, const float* x, const void* w, bool w_bf16, int M, int N, int K, int n0, int n1) {
  tiling::rows_f32_or_bf16<Avx512>(out, x, w, w_bf16, M, N, K, n0, n1);
}

}  // namespace servelab::cpu
