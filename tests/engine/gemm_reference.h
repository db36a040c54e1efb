// SPDX-License-Identifier: MIT
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
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "test_util.h"

namespace servelab::test {

/// A host [rows, cols] tensor of @p dtype holding @p values (f32, or bf16 rounded to nearest).
inline Tensor host_matrix(const std::vector<float>& values, std::int64_t rows, std::int64_t cols, DType dtype) {
  Tensor t = Tensor::zeros(dtype, {rows, cols});
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::F32)
      t.as<float>()[i] = values[i];
    else
      t.as<std::uint16_t>()[i] = f32_to_bf16(values[i]);
  }
  return t;
}

/// [N, K] weight of uniform values in [-1, 1) from @p seed, stored as @p dtype (bf16 rounded to nearest).
inline Tensor random_weight(int N, int K, unsigned seed, DType dtype = DType::F32) {
  return host_matrix(random_floats(static_cast<std::size_t>(N) * K, seed), N, K, dtype);
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
        const double t =
            double(x[static_cast<std::size_t>(m) * K + k]) * weight_value(w, static_cast<std::size_t>(n) * K + k);
        s += abs_terms ? std::abs(t) : t;
      }
      out[static_cast<std::size_t>(m) * N + n] = s;
    }
  return out;
}

/**
 * @brief Elements of @p out outside the rounding bound of a bf16-weight GEMM
 *        (kernels/gemm_dnnl.h): with @p bf16_inputs, rounding each input to
 *        bf16 moves each product by at most 2^-8 of itself (8 significant
 *        bits); the f32 sum adds at most K·2^-24 of the sum of |terms|:
 *        |out − exact| ≤ (2^-8 + K·2^-24) · Σ_k |x_k w_k|. Without it (weights
 *        widened to f32) the first term is 0. A non-finite element is outside.
 * @return the count, and a description of the first element outside, for INFO.
 */
inline std::pair<std::size_t, std::string> outside_bf16_bound(const std::vector<float>& out,
                                                              const std::vector<float>& x, const Tensor& w, int M,
                                                              bool bf16_inputs) {
  const auto expected = gemm_reference(x, w, M), scale = gemm_reference(x, w, M, true);
  const double rel = (bf16_inputs ? std::ldexp(1.0, -8) : 0.0) + static_cast<double>(w.shape[1]) * std::ldexp(1.0, -24);
  std::size_t outside = 0;
  std::string first;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (std::isfinite(out[i]) && std::abs(out[i] - expected[i]) <= rel * scale[i] + 1e-30) continue;
    if (outside++ == 0)
      first = "first at " + std::to_string(i) + ": " + std::to_string(out[i]) + " vs " + std::to_string(expected[i]) +
              ", bound " + std::to_string(rel * scale[i]);
  }
  return {outside, first};
}

}  // namespace servelab::test
