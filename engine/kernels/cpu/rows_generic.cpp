// SPDX-License-Identifier: MIT
// Portable row kernel: eight interleaved partial sums, combined in a fixed tree.
#include <cstring>

#include "kernels/cpu/rows.h"

namespace servelab::cpu {

namespace {

float weight_at(const void* w, bool bf16, long i) {
  if (!bf16) return static_cast<const float*>(w)[i];
  const std::uint32_t bits = static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(w)[i]) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

void rows_generic(float* out, const float* x, const void* w, bool w_bf16, int M, int N, int K, int n0, int n1) {
  for (int n = n0; n < n1; ++n) {
    const long base = static_cast<long>(n) * K;
    for (int m = 0; m < M; ++m) {
      const float* xm = x + static_cast<long>(m) * K;
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int k = 0;
      for (; k + 8 <= K; k += 8)
        for (int j = 0; j < 8; ++j) acc[j] += xm[k + j] * weight_at(w, w_bf16, base + k + j);
      for (int j = 0; k < K; ++k, ++j) acc[j] += xm[k] * weight_at(w, w_bf16, base + k);
      out[static_cast<long>(m) * N + n] =
          ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
  }
}

}  // namespace servelab::cpu
