// SPDX-License-Identifier: MIT
// AVX512_BF16 row kernel (compiled with -mavx512f -mavx512bw -mavx512bf16; called only after
// bf16_dot_supported()). Intrinsics and plain loops only, for the same reason as rows_avx512.cpp.
#include <immintrin.h>

#include "kernels/cpu/rows.h"
#include "kernels/cpu/rows_tiling.h"

namespace servelab::cpu {

namespace {

inline __m512bh load_bf16(const std::uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load_bf16(const std::uint16_t* p, __mmask32 mask) {
  return (__m512bh)_mm512_maskz_loadu_epi16(mask, p);
}

// The policy rows_tiling.h walks the output with: its widest input block and its tile.
// out[m..m+MR)[n..n+NR) as in rows_avx512.cpp, 32 products per instruction: vdpbf16ps adds
// x[2i]·w[2i] + x[2i+1]·w[2i+1] into f32 lane i. A 32-element step reads one 64-byte line of each
// weight row, so the rows ahead (tiling::kPrefetchRows) are prefetched a line per step.
struct Avx512Bf16 {
  static constexpr int kMaxInputs = 4;
  template <int NR, int MR, typename W>
  static void tile(float* out, const std::uint16_t* x, const W* w, int N, int K, int n, int m, bool prefetch) {
    __m512 acc[NR][MR];
    for (int a = 0; a < NR; ++a)
      for (int b = 0; b < MR; ++b) acc[a][b] = _mm512_setzero_ps();
    const int K32 = K & ~31;
    for (int k = 0; k < K32; k += 32) {
      __m512bh xv[MR];
      for (int b = 0; b < MR; ++b) xv[b] = load_bf16(x + static_cast<long>(m + b) * K + k);
      for (int a = 0; a < NR; ++a) {
        const long row = static_cast<long>(n + a) * K;
        if (prefetch)
          _mm_prefetch(reinterpret_cast<const char*>(w + row + static_cast<long>(tiling::kPrefetchRows) * K + k),
                       _MM_HINT_T2);
        const __m512bh wv = load_bf16(w + row + k);
        for (int b = 0; b < MR; ++b) acc[a][b] = _mm512_dpbf16_ps(acc[a][b], wv, xv[b]);
      }
    }
    if (K32 < K) {  // zeros past K add nothing
      const __mmask32 mask = static_cast<__mmask32>((1ull << (K - K32)) - 1);
      __m512bh xv[MR];
      for (int b = 0; b < MR; ++b) xv[b] = load_bf16(x + static_cast<long>(m + b) * K + K32, mask);
      for (int a = 0; a < NR; ++a) {
        const __m512bh wv = load_bf16(w + static_cast<long>(n + a) * K + K32, mask);
        for (int b = 0; b < MR; ++b) acc[a][b] = _mm512_dpbf16_ps(acc[a][b], wv, xv[b]);
      }
    }
    for (int a = 0; a < NR; ++a)
      for (int b = 0; b < MR; ++b) out[static_cast<long>(m + b) * N + n + a] = _mm512_reduce_add_ps(acc[a][b]);
  }
};

}  // namespace

void rows_avx512_bf16(float* out, const std::uint16_t* x, const std::uint16_t* w, int M, int N, int K, int n0, int n1) {
  tiling::rows<Avx512Bf16>(out, x, w, M, N, K, n0, n1);
}

}  // namespace servelab::cpu
