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
 */
#pragma once

namespace servelab::cpu::tiling {

/// One block of NR weight rows against all M inputs; only the last tile prefetches the next rows.
template <typename Isa, int NR, typename W>
inline void column_block(float* out, const float* x, const W* w, int M, int N, int K, int n, bool prefetch) {
  constexpr int MR = Isa::kMaxInputs;
  int m = 0;
  for (; m + MR <= M; m += MR) Isa::template tile<NR, MR>(out, x, w, N, K, n, m, prefetch && m + MR >= M);
  for (; m < M; ++m) Isa::template tile<NR, 1>(out, x, w, N, K, n, m, prefetch && m + 1 == M);
}

/// Weight rows [n0, n1): 4-row tiles, then single rows.
template <typename Isa, typename W>
inline void rows(float* out, const float* x, const W* w, int M, int N, int K, int n0, int n1) {
  int n = n0;
  for (; n + 4 <= n1; n += 4) column_block<Isa, 4>(out, x, w, M, N, K, n, n + 8 <= N);
  for (; n < n1; ++n) column_block<Isa, 1>(out, x, w, M, N, K, n, false);
}

}  // namespace servelab::cpu::tiling
