// SPDX-License-Identifier: MIT
// The AVX-512 peak loops (peak_chains.h); compiled with -mavx512f -mavx512bf16 -mfma, called after a CPU check.
#include <immintrin.h>

#include "core/dtype.h"
#include "perf/peak_chains.h"

namespace servelab::perf {

namespace {
__m512 add(__m512 x, __m512 y) { return _mm512_add_ps(x, y); }
}  // namespace

float peak_f32_avx512(long steps) {
  const __m512 b = _mm512_set1_ps(peak_mul), c = _mm512_set1_ps(peak_add);
  return _mm512_reduce_add_ps(run_chains(
      steps, [](int i) { return _mm512_set1_ps(1.0f + i * peak_add); },
      [=](__m512 a) { return _mm512_fmadd_ps(a, b, c); }, add));
}

float peak_bf16_avx512(long steps) {
  const __m512bh b = (__m512bh)_mm512_set1_epi16(static_cast<short>(f32_to_bf16(peak_mul)));
  return _mm512_reduce_add_ps(run_chains(
      steps, [](int i) { return _mm512_set1_ps(i * peak_add); }, [=](__m512 a) { return _mm512_dpbf16_ps(a, b, b); },
      add));
}

}  // namespace servelab::perf
