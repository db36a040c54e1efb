// SPDX-License-Identifier: MIT
/**
 * @file rows_tiling.h
 * @brief How the SIMD row kernels walk the output: tiles of 4 weight rows
 *        against up to Isa::kMaxInputs input rows, then the tails.
 *
 * Used by each instruction set's file (rows_avx2.cpp, rows_avx512.cpp,
 * rows_avx512_bf16.cpp) with a policy type from that file's anonymous
 * namespace. The instantiations are therefore local to the file: code
 * compiled for AVX-512 is never merged with, or called from, the code other
 * CPUs run.
 *
 * The policy provides, as static members:
 * - `kMaxInputs`, the widest input block;
 * - `zero()`, an f32 accumulator of zeros; `load(p)`, one vector at p (an
 *   input, or a weight widened to f32 or kept as bf16, as fma() takes it),
 *   whose input elements are the lanes() of K one step multiplies;
 *   `fma(acc, w, x)`, acc plus the products; `reduce(acc)`, its horizontal sum;
 * - for the K % lanes() tail, either `tail_mask(count)` and `load(p, mask)`
 *   (a masked step), or `widen(w)`, one weight as a float (a scalar loop).
 * Inputs @p x are f32, or bf16 bits for the bf16 dot-product kernel (X).
 */
#pragma once

#include <xmmintrin.h>

#include <cstdint>

namespace servelab::cpu::tiling {

/**
 * @brief Weight rows a tile prefetches ahead of those it computes (two 4-row
 *        tiles), into L2 (_MM_HINT_T2), not L1.
 *
 * Measured on a 2-vCPU Zen 4 VM, batch 1 over the 272 MB bf16 LM head of
 * qwen2.5-0.5b: prefetching the next tile into L1 held the kernels to
 * 10 GB/s (bf16) and 14 GB/s (f32), under the 17-24 GB/s streaming-read
 * roof; prefetching into L2 reached 19 GB/s for both. For bf16 rows one tile
 * ahead is only 7 KB (K = 896), too close; two tiles is as good as one for f32.
 * The price: weights that stay in cache (the `small` preset's 1.5-8 MB
 * matrices) ran 5-10% faster at batch 1 with the L1 prefetch; the kernels
 * are tuned for models that do not fit in cache.
 */
inline constexpr int kPrefetchRows = 8;

/// Elements of K one step of Isa takes: an input vector's (a power of two).
template <typename Isa, typename X>
constexpr int lanes() {
  return static_cast<int>(sizeof(decltype(Isa::load(static_cast<const X*>(nullptr)))) / sizeof(X));
}

/**
 * @brief One step of a tile at element @p k: acc[a][b] += weight row n + a times
 *        input row m + b, over lanes<Isa, X>() elements (those @p mask keeps, when given).
 *
 * With @p prefetch it also fetches, into L2, the weight rows kPrefetchRows ahead
 * at the same k.
 */
template <typename Isa, int NR, int MR, typename Acc, typename X, typename W, typename... Mask>
inline void step(Acc (&acc)[NR][MR], const X* x, const W* w, int K, int n, int m, int k, bool prefetch, Mask... mask) {
  decltype(Isa::load(x, mask...)) xv[MR];
  for (int b = 0; b < MR; ++b) xv[b] = Isa::load(x + static_cast<long>(m + b) * K + k, mask...);
  for (int a = 0; a < NR; ++a) {
    const long row = static_cast<long>(n + a) * K;
    if (prefetch)
      _mm_prefetch(reinterpret_cast<const char*>(w + row + static_cast<long>(kPrefetchRows) * K + k), _MM_HINT_T2);
    const auto wv = Isa::load(w + row + k, mask...);
    for (int b = 0; b < MR; ++b) acc[a][b] = Isa::fma(acc[a][b], wv, xv[b]);
  }
}

/**
 * @brief out[m..m+MR)[n..n+NR): MR inputs against NR weight rows, one
 *        accumulator per dot product, K walked in the same order for every
 *        tile shape.
 *
 * `prefetch` says whether the rows kPrefetchRows ahead exist: they are
 * fetched while this tile computes, because the hardware prefetcher alone
 * ramps up too slowly on rows of a few KB. One prefetch per 16 elements is
 * one per 64-byte line of f32 weights. The K % lanes() tail is a masked step
 * where the policy has tail_mask() (masked loads in the main loop cost a
 * third of the bandwidth on the machines we measured), else a scalar loop
 * after the horizontal sum.
 *
 * Kept out of line: inlined into rows(), GCC 12 spilled an accumulator of the
 * AVX2 kernel's 4×2 tile and ran it at half speed on bf16 weights.
 */
template <typename Isa, int NR, int MR, typename X, typename W>
[[gnu::noinline]] void tile(float* out, const X* x, const W* w, int N, int K, int n, int m, bool prefetch) {
  decltype(Isa::zero()) acc[NR][MR];
  for (int a = 0; a < NR; ++a)
    for (int b = 0; b < MR; ++b) acc[a][b] = Isa::zero();
  constexpr int kStep = lanes<Isa, X>();
  const int k_tail = K & ~(kStep - 1);
  for (int k = 0; k < k_tail; k += kStep) step<Isa>(acc, x, w, K, n, m, k, prefetch && k % 16 == 0);
  constexpr bool masked_tail = requires { Isa::tail_mask(0); };
  if constexpr (masked_tail) {
    if (k_tail < K) step<Isa>(acc, x, w, K, n, m, k_tail, false, Isa::tail_mask(K - k_tail));  // zeros add nothing
  }
  for (int a = 0; a < NR; ++a)
    for (int b = 0; b < MR; ++b) {
      float s = Isa::reduce(acc[a][b]);
      if constexpr (!masked_tail) {
        const X* xm = x + static_cast<long>(m + b) * K;
        const W* wn = w + static_cast<long>(n + a) * K;
        for (int k = k_tail; k < K; ++k) s += xm[k] * Isa::widen(wn[k]);  // in order
      }
      out[static_cast<long>(m + b) * N + n + a] = s;
    }
}

/// One block of NR weight rows against all M inputs; only the last tile prefetches rows ahead (kPrefetchRows).
template <typename Isa, int NR, typename X, typename W>
inline void column_block(float* out, const X* x, const W* w, int M, int N, int K, int n, bool prefetch) {
  constexpr int MR = Isa::kMaxInputs;
  int m = 0;
  for (; m + MR <= M; m += MR) tile<Isa, NR, MR>(out, x, w, N, K, n, m, prefetch && m + MR >= M);
  for (; m < M; ++m) tile<Isa, NR, 1>(out, x, w, N, K, n, m, prefetch && m + 1 == M);
}

/// Weight rows [n0, n1): 4-row tiles, then single rows.
template <typename Isa, typename X, typename W>
inline void rows(float* out, const X* x, const W* w, int M, int N, int K, int n0, int n1) {
  int n = n0;
  for (; n + 4 <= n1; n += 4) column_block<Isa, 4>(out, x, w, M, N, K, n, n + 4 + kPrefetchRows <= N);
  for (; n < n1; ++n) column_block<Isa, 1>(out, x, w, M, N, K, n, false);
}

/// rows() over f32 inputs and weights that are f32, or bf16 (uint16) when @p w_bf16.
template <typename Isa>
inline void rows_f32_or_bf16(float* out, const float* x, const void* w, bool w_bf16, int M, int N, int K, int n0,
                             int n1) {
  if (w_bf16)
    rows<Isa>(out, x, static_cast<const std::uint16_t*>(w), M, N, K, n0, n1);
  else
    rows<Isa>(out, x, static_cast<const float*>(w), M, N, K, n0, n1);
}

}  // namespace servelab::cpu::tiling
