// SPDX-License-Identifier: MIT
// Portable row kernel: eight interleaved partial sums, combined in a fixed tree.
#include <cstddef>

#include "core/quant.h"
#include "kernels/cpu/rows.h"

namespace servelab::cpu {

void rows_generic(float* out, const float* x, const void* w, DType w_dtype, int M, int N, int K, int n0, int n1) {
  for (int n = n0; n < n1; ++n) {
    const void* row = static_cast<const std::byte*>(w) + dtype_nbytes(w_dtype, static_cast<long>(n) * K);
    for (int m = 0; m < M; ++m) {
      const float* xm = x + static_cast<long>(m) * K;
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int k = 0;
      for (; k + 8 <= K; k += 8)
        for (int j = 0; j < 8; ++j) acc[j] += xm[k + j] * element_at(w_dtype, row, k + j);
      for (int j = 0; k < K; ++k, ++j) acc[j] += xm[k] * element_at(w_dtype, row, k);
      out[static_cast<long>(m) * N + n] =
          ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
  }
}

}  // namespace servelab::cpu
