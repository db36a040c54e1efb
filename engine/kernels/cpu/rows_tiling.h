// SPDX-License-Identifier: MIT
/**
 * @file rows_tiling.h
 * @brief How the SIMD row kernels walk the output: tiles of 4 weight rows
 *        against up to Isa::kMaxInputs input rows, then the tails.
 *
 * Used by each instruction set's file (rows_avx2.cpp, rows_avx512.cpp) with
 * a policy type from that file's anonymous namespace. The instantiations are
 * therefore local to the file: code compiled for AVX-512 is never merged
 * with, or called from, the code other CPUs run.
 *
 * The policy provides
 * `template <int NR, int MR, typename W> static void tile(out, x, w, N, K, n, m, prefetch)`,
 * computing out[m..m+MR)[n..n+NR), and `static constexpr int kMaxInputs`.
 * Inputs @p x are f32, or bf16 bits for the bf16 dot-product kernel (X).
 */
#pragma once

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

/// One block of NR weight rows against all M inputs; only the last tile prefetches rows ahead (kPrefetchRows).
template <typename Isa, int NR, typename X, typename W>
inline void column_block(float* out, const X* x, const W* w, int M, int N, int K, int n, bool prefetch) {
  constexpr int MR = Isa::kMaxInputs;
  int m = 0;
  for (; m + MR <= M; m += MR) Isa::template tile<NR, MR>(out, x, w, N, K, n, m, prefetch && m + MR >= M);
  for (; m < M; ++m) Isa::template tile<NR, 1>(out, x, w, N, K, n, m, prefetch && m + 1 == M);
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
