// SPDX-License-Identifier: MIT
// AVX512_VNNI integer-dot row kernel (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma -mf16c;
// called only after vnni_supported()). Intrinsics and plain loops only, for the same reason as rows_avx512.cpp.
#include <immintrin.h>

#include "kernels/cpu/rows.h"
#include "kernels/cpu/rows_int8_256.h"
#include "kernels/cpu/rows_tiling.h"

namespace servelab::cpu {

namespace {

// vpdpbusd adds the products of unsigned by signed bytes, four at a time, into 8 int32 lanes in one
// instruction, where AVX2 needs two and an int16 step. Its EVEX encoding has 32 registers: four inputs per tile.
struct VnniDot {
  static __m256i dot(__m256i w, __m256i x) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, x); }
};

}  // namespace

void rows_int8_avx512_vnni(float* out, const BlockQ8Input* x, const void* w, DType w_dtype, int M, int N, int K, int n0,
                           int n1) {
  tiling::rows_any<Int8Blocks256<VnniDot, 4>>(out, x, w, w_dtype, M, N, K, n0, n1);
}

}  // namespace servelab::cpu
