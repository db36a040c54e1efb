// SPDX-License-Identifier: MIT
// The AVX2 peak loop (peak_chains.h); compiled with -mavx2 -mfma, called after a CPU check.
#include <immintrin.h>

#include "perf/peak_chains.h"

namespace servelab::perf {

float peak_f32_avx2(long steps) {
  const __m256 b = _mm256_set1_ps(peak_mul), c = _mm256_set1_ps(peak_add);
  const __m256 sum = run_chains(
      steps, [](int i) { return _mm256_set1_ps(1.0f + i * peak_add); },
      [=](__m256 a) { return _mm256_fmadd_ps(a, b, c); }, [](__m256 x, __m256 y) { return _mm256_add_ps(x, y); });
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

}  // namespace servelab::perf
