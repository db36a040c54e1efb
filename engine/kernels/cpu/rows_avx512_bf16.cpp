// SPDX-License-Identifier: MIT
// AVX512_BF16 row kernel (compiled with -mavx512f -mavx512bw -mavx512bf16; called only after
// bf16_dot_supported()). Intrinsics and plain loops only, for the same reason as rows_avx512.cpp.
#include <immintrin.h>

#include "kernels/cpu/rows.h"
#include "kernels/cpu/rows_tiling.h"

namespace servelab::cpu {

namespace {

// The policy rows_tiling.h walks the output with: the tiles of rows_avx512.cpp, 32 products per
// instruction: vdpbf16ps adds x[2i]·w[2i] + x[2i+1]·w[2i+1] into f32 lane i. load() reads 32 bf16
// inputs or weights as they are. A 32-element step reads one 64-byte line of each weight row.
struct Avx512Bf16 {
  static constexpr int kMaxInputs = 4;
  static __m512 zero() { return _mm512_setzero_ps(); }
  static __m512bh load(const std::uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
  static __m512bh load(const std::uint16_t* p, __mmask32 mask) { return (__m512bh)_mm512_maskz_loadu_epi16(mask, p); }
  static __mmask32 tail_mask(int count) { return static_cast<__mmask32>((1ull << count) - 1); }
  static __m512 fma(__m512 acc, __m512bh w, __m512bh x) { return _mm512_dpbf16_ps(acc, w, x); }
  static float reduce(__m512 v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace

void rows_avx512_bf16(float* out, const std::uint16_t* x, const std::uint16_t* w, int M, int N, int K, int n0, int n1) {
  tiling::rows<Avx512Bf16>(out, x, tiling::PlainRows<std::uint16_t>{w, K}, M, N, K, n0, n1);
}

}  // namespace servelab::cpu
