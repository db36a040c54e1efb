/**
 * @file gemm_reference.h
 * @brief The tests' double-precision GEMM, out = x · Wᵀ, and the random
 *        weights it is checked on. Every GEMM path (rows, OpenBLAS, oneDNN)
 *        is compared with this one loop.
 */
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "test_util.h"

namespace servelab::test {

/// [N, K] weight of uniform values in [-1, 1) from @p seed, stored as @p dtype (bf16 rounded to nearest).
inline Tensor random_weight(int N, int K, unsigned seed, DType dtype = DType::F32) {
  Tensor w = Tensor::zeros(dtype, {N, K});
  const auto r = random_floats(static_cast<std::size_t>(N) * K, seed);
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (dtype == DType::F32)
      w.as<float>()[i] = r[i];
    else
      w.as<std::uint16_t>()[i] = f32_to_bf16(r[i]);
  }
  return w;
}

/// Element @p i of an f32 or bf16 weight, as f32 (exact).
inline float weight_value(const Tensor& w, std::size_t i) {
  return w.dtype == DType::F32 ? w.as<float>()[i] : bf16_to_f32(w.as<std::uint16_t>()[i]);
}

/**
 * @brief out[m][n] = Σ_k x[m][k] · w[n][k] in double; with @p abs_terms,
 *        Σ_k |x[m][k] · w[n][k]| instead (the scale a rounding bound is stated in).
 * @return [M, N].
 */
inline std::vector<double> gemm_reference(const std::vector<float>& x, const Tensor& w, int M, bool abs_terms = false) {
  const int N = static_cast<int>(w.shape[0]), K = static_cast<int>(w.shape[1]);
  std::vector<double> out(static_cast<std::size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) {
        const double t = double(x[static_cast<std::size_t>(m) * K + k]) * weight_value(w, static_cast<std::size_t>(n) * K + k);
        s += abs_terms ? std::abs(t) : t;
      }
      out[static_cast<std::size_t>(m) * N + n] = s;
    }
  return out;
}

}  // namespace servelab::test
