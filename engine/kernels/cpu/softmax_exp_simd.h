// SPDX-License-Identifier: MIT
/**
 * @file softmax_exp_simd.h
 * @brief softmax_exp.h's and silu.h's kernels written once over an
 *        instruction-set policy (the one rows_tiling.h takes, plus `set1(x)`,
 *        `store(p, v)`, `max(a, b)`, `div(a, b)`, `round(v)` to the nearest
 *        integer and `pow2(n)`, 2^n for integral n in [-126, 127]),
 *        instantiated in rows_avx2.cpp and rows_avx512.cpp.
 */
#pragma once

#include <cmath>

#include "kernels/cpu/rows_tiling.h"

namespace servelab::cpu::tiling {

/**
 * @brief e^x for x ≤ 0, a vector at a time: x = n·ln 2 + r with n = round(x·log2 e)
 *        and |r| ≤ ln 2 / 2, e^r by its Taylor series to r⁶/720 (truncation
 *        error below 2·10⁻⁷ relative), times 2^n from the exponent bits.
 *
 * x below −87 is taken as −87 (e^−87 ≈ 1.6·10⁻³⁸, the smallest n whose 2^n is a
 * normal float): a softmax weight that small is zero beside the row's
 * largest, e⁰ = 1.
 */
template <typename Isa, typename V>
inline V exp_nonpositive(V x) {
  x = Isa::max(x, Isa::set1(-87.0f));
  const V n = Isa::round(Isa::mul(x, Isa::set1(1.44269504f)));
  // r = x − n·ln 2, with ln 2 split in two so n·ln2_hi is exact (Cody and Waite).
  V r = Isa::fma(x, n, Isa::set1(-0.693145751953125f));
  r = Isa::fma(r, n, Isa::set1(-1.428606765330187e-06f));
  V e = Isa::set1(1.0f / 720);
  for (const float c : {1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) e = Isa::fma(Isa::set1(c), e, r);
  return Isa::mul(e, Isa::pow2(n));
}

/// softmax_exp.h's ExpSumKernel on policy Isa: whole vectors here, the n % lanes tail with libm.
template <typename Isa>
inline float exp_sum(float* p, int n, float max) {
  constexpr int L = lanes<Isa, float>();
  const auto minus_max = Isa::set1(-max);
  auto sum = Isa::zero();
  int j = 0;
  for (; j + L <= n; j += L) {
    const auto e = exp_nonpositive<Isa>(Isa::add(Isa::load(p + j), minus_max));
    Isa::store(p + j, e);
    sum = Isa::add(sum, e);
  }
  float total = Isa::reduce(sum);
  for (; j < n; ++j) total += (p[j] = std::exp(p[j] - max));
  return total;
}

/**
 * @brief silu.h's SiluMulKernel on policy Isa: whole vectors here, the n % lanes tail with libm.
 *
 * e^(−x) is exp_nonpositive() of −max(x, −87): its range reduction holds for
 * exponents up to 87 as well (2^n with n ≤ 126), and a gate below −87 has
 * silu within 10⁻³⁵ of 0 either way; above 87 the exponent clamps at −87 and
 * x / (1 + e^−87) is x.
 */
template <typename Isa>
inline void silu_mul(float* out, const float* gate, const float* up, int n) {
  constexpr int L = lanes<Isa, float>();
  const auto one = Isa::set1(1.0f), minus_one = Isa::set1(-1.0f), floor = Isa::set1(-87.0f);
  int i = 0;
  for (; i + L <= n; i += L) {
    const auto x = Isa::load(gate + i);
    const auto e = exp_nonpositive<Isa>(Isa::mul(Isa::max(x, floor), minus_one));
    Isa::store(out + i, Isa::mul(Isa::div(x, Isa::add(one, e)), Isa::load(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace servelab::cpu::tiling
