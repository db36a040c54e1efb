// SPDX-License-Identifier: MIT
/**
 * @file attention_tile_simd.h
 * @brief attention_tile.h's kernels written once over an instruction-set
 *        policy (the one rows_tiling.h takes, plus `set1(x)` and
 *        `store(p, v)`), instantiated in rows_avx2.cpp and rows_avx512.cpp.
 */
#pragma once

#include <cstddef>
#include <type_traits>

#include "kernels/cpu/rows_tiling.h"

namespace servelab::cpu::tiling {

/**
 * @brief R query rows against the run's keys: a key row is loaded a vector at a time and multiplied into R
 *        accumulators, so it is read once for the R rows (R independent FMA chains). TileScoresKernel's contract.
 */
template <typename Isa, int R>
inline void scores_rows(float* s, int lds, const float* q, int ldq, const float* k, std::size_t ldk, int n, int D,
                        float scale) {
  constexpr int L = lanes<Isa, float>();
  for (int j = 0; j < n; ++j) {
    const float* kj = k + static_cast<std::size_t>(j) * ldk;
    decltype(Isa::zero()) acc[R];
    for (int r = 0; r < R; ++r) acc[r] = Isa::zero();
    int d = 0;
    for (; d + L <= D; d += L) {
      const auto kv = Isa::load(kj + d);
      for (int r = 0; r < R; ++r) acc[r] = Isa::fma(acc[r], kv, Isa::load(q + r * ldq + d));
    }
    for (int r = 0; r < R; ++r) {
      float sum = Isa::reduce(acc[r]);
      for (int e = d; e < D; ++e) sum += q[r * ldq + e] * kj[e];
      s[r * lds + j] = sum * scale;
    }
  }
}

/**
 * @brief R accumulator rows, two vectors of D at a time (2R independent chains), over every value row of the
 *        run. TileValuesKernel's contract.
 */
template <typename Isa, int R>
inline void values_rows(float* o, int ldo, const float* p, int ldp, const float* v, std::size_t ldv, int n, int D) {
  constexpr int L = lanes<Isa, float>();
  int d = 0;
  for (; d + 2 * L <= D; d += 2 * L) {
    decltype(Isa::zero()) lo[R], hi[R];
    for (int r = 0; r < R; ++r) {
      lo[r] = Isa::load(o + r * ldo + d);
      hi[r] = Isa::load(o + r * ldo + d + L);
    }
    for (int j = 0; j < n; ++j) {
      const float* vj = v + static_cast<std::size_t>(j) * ldv + d;
      const auto a = Isa::load(vj), b = Isa::load(vj + L);
      for (int r = 0; r < R; ++r) {
        const auto w = Isa::set1(p[r * ldp + j]);
        lo[r] = Isa::fma(lo[r], a, w);
        hi[r] = Isa::fma(hi[r], b, w);
      }
    }
    for (int r = 0; r < R; ++r) {
      Isa::store(o + r * ldo + d, lo[r]);
      Isa::store(o + r * ldo + d + L, hi[r]);
    }
  }
  for (; d < D; ++d)  // a head width that is not a multiple of 2·lanes (none of the presets)
    for (int r = 0; r < R; ++r) {
      float acc = o[r * ldo + d];
      for (int j = 0; j < n; ++j) acc += p[r * ldp + j] * v[static_cast<std::size_t>(j) * ldv + d];
      o[r * ldo + d] = acc;
    }
}

/// Calls fn(r, std::integral_constant<int, R>{}) for the rows [r, r + R): R = 4 while four are left, then the 1-3 left.
template <typename Fn>
inline void by_four_rows(int rows, Fn fn) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) fn(r, std::integral_constant<int, 4>{});
  switch (rows - r) {
    case 3: fn(r, std::integral_constant<int, 3>{}); break;
    case 2: fn(r, std::integral_constant<int, 2>{}); break;
    case 1: fn(r, std::integral_constant<int, 1>{}); break;
    default: break;
  }
}

/// attention_tile.h's TileScoresKernel on policy Isa.
template <typename Isa>
inline void tile_scores(float* s, int lds, const float* q, int ldq, int rows, const float* k, std::size_t ldk, int n,
                        int D, float scale) {
  by_four_rows(rows, [&](int r, auto R) {
    scores_rows<Isa, decltype(R)::value>(s + r * lds, lds, q + r * ldq, ldq, k, ldk, n, D, scale);
  });
}

/// attention_tile.h's TileValuesKernel on policy Isa.
template <typename Isa>
inline void tile_values(float* o, int ldo, const float* p, int ldp, int rows, const float* v, std::size_t ldv, int n,
                        int D) {
  by_four_rows(rows, [&](int r, auto R) {
    values_rows<Isa, decltype(R)::value>(o + r * ldo, ldo, p + r * ldp, ldp, v, ldv, n, D);
  });
}

}  // namespace servelab::cpu::tiling
