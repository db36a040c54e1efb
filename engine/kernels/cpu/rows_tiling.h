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
 * Weights are a PlainRows or a BlockRows view. For blocks the policy also
 * provides `int8s(p)` (a vector of int8 at p as floats), `nibbles(qs, j, offset)`
 * (the 4-bit elements j.. of a block plus offset, as floats), `f16(bits)` (a
 * broadcast scale), `mul` and `add`; load_weights() builds each format from them.
 */
#pragma once

#include <xmmintrin.h>

#include <cstdint>
#include <type_traits>

#include "core/quant.h"

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
 *
 * This is the distance in f32 rows: plain rows of 2-byte elements (bf16)
 * fetch twice as many rows ahead, the same bytes (PlainRows::kRowsAhead).
 * On a 2-vCPU Zen 3 (AVX2), weights in huge pages, bench BM_Decode of
 * qwen2.5-0.5b, three alternating runs: bf16 16.8-17.3 tok/s with 16 rows
 * ahead against 15.4-15.8 with 8 at one thread, 26.7-28.1 against 25.3-28.6
 * at two; f32 with 16 rows ahead lost (15.3-16.2 against 16.7-20.8 at two
 * threads), so it keeps 8.
 */
inline constexpr int kPrefetchRows = 8;

/**
 * @brief Prefetch instructions per 64-byte line of plain weight rows: each
 *        step fetches the lines it will need kPrefetchRows ahead and the
 *        next ones, so every line is asked for this many times.
 *
 * One request per line left bandwidth unused on the 2-vCPU Zen 4 VM (the
 * likely cause, not observed directly: a prefetch that finds no free miss
 * buffer is dropped, and the demand load then waits for the whole trip to
 * memory). Measured one thread, batch 1,
 * the GEMVs of a qwen2.5-0.5b decode step in turn (990 MB bf16, 1.98 GB
 * f32), GB/s: AVX-512 f32 23-25 → 29-34, bf16 22-24 → 27-30, bf16 dot
 * 22-23 → 28-31; AVX2 f32 23-25 → 30-34; the whole decode step (bench
 * BM_Decode, one thread) 17-20% more tok/s in f32, bf16 and bf16 math.
 * Eight or more per line fell below one (the prefetches crowd out the
 * loads). Weights already in cache pay for the extra instructions: a GEMV
 * repeated over the same 0.3-4 MB fell from 50-75 to 28-45 GB/s, but the
 * `small` preset's decode step (a 12 MB model) moved by less than its noise
 * (TPOT 0.56-0.67 ms before, 0.62-0.66 after, one thread).
 */
inline constexpr int kPrefetchesPerLine = 4;

/// Elements of K one step of Isa takes: an input vector's (a power of two).
template <typename Isa, typename X>
constexpr int lanes() {
  return static_cast<int>(sizeof(decltype(Isa::load(static_cast<const X*>(nullptr)))) / sizeof(X));
}

/**
 * @brief Weight rows of plain elements (f32, or bf16 bits): element k of row n is w[n·K + k].
 */
template <typename T>
struct PlainRows {
  const T* w;  ///< row 0
  int K;       ///< elements per row
  /// Elements between two prefetch points: every step.
  static constexpr int kPrefetchEvery = 1;
  /// Rows ahead that a tile prefetches: kPrefetchRows' bytes, so twice the rows for bf16.
  static constexpr int kRowsAhead = kPrefetchRows * static_cast<int>(sizeof(float) / sizeof(T));
  /// Consecutive lines fetched at a prefetch point of a step over @p step elements: kPrefetchesPerLine per line read.
  static constexpr int prefetch_lines(int step) {
    const int lines = kPrefetchesPerLine * step * static_cast<int>(sizeof(T)) / 64;
    return lines > 1 ? lines : 1;
  }
  /// True when every row is a whole number of vector steps (no tail); plain rows have any K.
  static constexpr bool kWholeSteps = false;
  /// Element k of row n, as the policy's load() takes it.
  const T* at(int n, int k) const { return w + static_cast<long>(n) * K + k; }
  /// The byte address of at(n, k), to prefetch.
  const void* address(int n, int k) const { return at(n, k); }
};

/// Element j of one block of a quantized row, as a policy's load() takes it.
template <typename Block>
struct BlockRef {
  const Block* block;  ///< the block holding the element
  int j;               ///< its index in the block, a multiple of the vector width
};

/**
 * @brief Weight rows of quantized blocks (core/quant.h): K / 32 blocks per row.
 *
 * The kernels widen a vector of elements in registers and multiply it as
 * they would an f32 one: the value of each element is dequantize()'s, the
 * order of the sums the f32 kernel's.
 */
template <typename Block>
struct BlockRows {
  const Block* w;  ///< row 0's first block
  int K;           ///< elements per row, a multiple of 32
  /// Elements between two prefetches: 64, one or two 64-byte lines of blocks.
  static constexpr int kPrefetchEvery = 64;
  /// Rows ahead that a tile prefetches (quantized rows were measured with kPrefetchRows only).
  static constexpr int kRowsAhead = kPrefetchRows;
  /// One line at each prefetch point (quantized rows were not measured with more).
  static constexpr int prefetch_lines(int) { return 1; }
  /// Every row is whole blocks, and a vector step divides a block: no tail.
  static constexpr bool kWholeSteps = true;
  /// Element k of row n.
  BlockRef<Block> at(int n, int k) const { return {w + static_cast<long>(n) * (K / 32) + k / 32, k % 32}; }
  /// The byte address of at(n, k)'s block, to prefetch.
  const void* address(int n, int k) const { return at(n, k).block; }
};

/// A vector of weights at @p p (plain rows): the policy's load().
template <typename Isa, typename P, typename... Mask>
inline auto load_weights(P p, Mask... mask) {
  return Isa::load(p, mask...);
}
/// A vector of a Q8_0 block widened to f32: q · d, as dequantize() (from the policy's int8s(), f16() and mul()).
template <typename Isa>
inline auto load_weights(BlockRef<BlockQ8_0> r) {
  return Isa::mul(Isa::int8s(r.block->qs + r.j), Isa::f16(r.block->d));
}
/// A vector of a Q4_0 block widened to f32: (q − 8) · d.
template <typename Isa>
inline auto load_weights(BlockRef<BlockQ4_0> r) {
  return Isa::mul(Isa::nibbles(r.block->qs, r.j, -8), Isa::f16(r.block->d));
}
/// A vector of a Q4_1 block widened to f32: q · d, then + m (two roundings, as dequantize()).
template <typename Isa>
inline auto load_weights(BlockRef<BlockQ4_1> r) {
  return Isa::add(Isa::mul(Isa::nibbles(r.block->qs, r.j, 0), Isa::f16(r.block->d)), Isa::f16(r.block->m));
}

/**
 * @brief Rows [n0, n1) of quantized weights widened to floats, K per row, into
 *        @p out: every vector load_weights() builds, stored as it is.
 *
 * So each value is dequantize()'s, as in tile(). A prefill GEMM over
 * quantized weights widens a tile of rows with it, then multiplies the tile
 * in f32 (gemm.cpp); dequantize_row(), one element at a time, ran at about
 * 1 G elements/s on a Zen 3, a third of the GEMM's time at 128 tokens.
 */
template <typename Isa, typename Block>
inline void widen(float* out, const BlockRows<Block>& w, int n0, int n1) {
  constexpr int kStep = lanes<Isa, float>();
  for (int n = n0; n < n1; ++n)
    for (int k = 0; k < w.K; k += kStep, out += kStep) Isa::store(out, load_weights<Isa>(w.at(n, k)));
}

/// widen() over weights of @p w_dtype: Q8_0, Q4_0 or Q4_1 (another type writes nothing).
template <typename Isa>
inline void widen_any(float* out, const void* w, DType w_dtype, int K, int n0, int n1) {
  switch (w_dtype) {
    case DType::Q8_0: return widen<Isa>(out, BlockRows<BlockQ8_0>{static_cast<const BlockQ8_0*>(w), K}, n0, n1);
    case DType::Q4_0: return widen<Isa>(out, BlockRows<BlockQ4_0>{static_cast<const BlockQ4_0*>(w), K}, n0, n1);
    case DType::Q4_1: return widen<Isa>(out, BlockRows<BlockQ4_1>{static_cast<const BlockQ4_1*>(w), K}, n0, n1);
    default: break;
  }
}

/**
 * @brief One step of a tile at element @p k: acc[a][b] += weight row n + a times
 *        input row m + b, over lanes<Isa, X>() elements (those @p mask keeps, when given).
 *
 * With @p prefetch it also fetches, into L2, the weight rows W::kRowsAhead ahead
 * at the same k.
 */
template <typename Isa, int NR, int MR, typename Acc, typename X, typename W, typename... Mask>
inline void step(Acc (&acc)[NR][MR], const X* x, const W& w, int K, int n, int m, int k, bool prefetch, Mask... mask) {
  decltype(Isa::load(x, mask...)) xv[MR];
  for (int b = 0; b < MR; ++b) xv[b] = Isa::load(x + static_cast<long>(m + b) * K + k, mask...);
  for (int a = 0; a < NR; ++a) {
    if (prefetch) {
      const char* ahead = static_cast<const char*>(w.address(n + a + W::kRowsAhead, k));
      for (int line = 0; line < W::prefetch_lines(lanes<Isa, X>()); ++line)
        _mm_prefetch(ahead + 64 * line, _MM_HINT_T2);
    }
    const auto wv = load_weights<Isa>(w.at(n + a, k), mask...);
    for (int b = 0; b < MR; ++b) acc[a][b] = Isa::fma(acc[a][b], wv, xv[b]);
  }
}

/**
 * @brief out[m..m+MR)[n..n+NR): MR inputs against NR weight rows, one
 *        accumulator per dot product, K walked in the same order for every
 *        tile shape.
 *
 * `prefetch` says whether the rows W::kRowsAhead ahead exist: they are
 * fetched while this tile computes, because the hardware prefetcher alone
 * ramps up too slowly on rows of a few KB (kPrefetchesPerLine requests per
 * line of plain rows, one per line of blocks). The K % lanes() tail is a masked step
 * where the policy has tail_mask() (masked loads in the main loop cost a
 * third of the bandwidth on the machines we measured), else a scalar loop
 * after the horizontal sum.
 *
 * Kept out of line: inlined into rows(), GCC 12 spilled an accumulator of the
 * AVX2 kernel's 4×2 tile and ran it at half speed on bf16 weights.
 */
template <typename Isa, int NR, int MR, typename X, typename W>
[[gnu::noinline]] void tile(float* out, const X* x, const W& w, int N, int K, int n, int m, bool prefetch) {
  decltype(Isa::zero()) acc[NR][MR];
  for (int a = 0; a < NR; ++a)
    for (int b = 0; b < MR; ++b) acc[a][b] = Isa::zero();
  constexpr int kStep = lanes<Isa, X>();
  const int k_tail = K & ~(kStep - 1);
  for (int k = 0; k < k_tail; k += kStep) step<Isa>(acc, x, w, K, n, m, k, prefetch && k % W::kPrefetchEvery == 0);
  constexpr bool masked_tail = requires { Isa::tail_mask(0); };
  constexpr bool scalar_tail = !masked_tail && !W::kWholeSteps;
  if constexpr (masked_tail && !W::kWholeSteps) {
    if (k_tail < K) step<Isa>(acc, x, w, K, n, m, k_tail, false, Isa::tail_mask(K - k_tail));  // zeros add nothing
  }
  for (int a = 0; a < NR; ++a)
    for (int b = 0; b < MR; ++b) {
      float s = Isa::reduce(acc[a][b]);
      if constexpr (scalar_tail) {
        const X* xm = x + static_cast<long>(m + b) * K;
        for (int k = k_tail; k < K; ++k) s += xm[k] * Isa::widen(*w.at(n + a, k));  // in order
      }
      out[static_cast<long>(m + b) * N + n + a] = s;
    }
}

/**
 * @brief The integer dot product of a Q8_0 weight block with an input block
 *        (signed × signed), as the policy's vector of int32 partial sums.
 */
template <typename Isa, typename XV>
inline auto block_dot(const BlockQ8_0& w, XV x) {
  return Isa::dot_signed(Isa::int8s(w.qs), x);
}
/// The integer dot product of a Q4_0 block (its nibbles − 8, signed) with an input block.
template <typename Isa, typename XV>
inline auto block_dot(const BlockQ4_0& w, XV x) {
  return Isa::dot_signed(Isa::minus8(Isa::nibbles(w.qs)), x);
}
/// The integer dot product of a Q4_1 block (its nibbles, unsigned; m is added apart) with an input block.
template <typename Isa, typename XV>
inline auto block_dot(const BlockQ4_1& w, XV x) {
  return Isa::dot_unsigned(Isa::nibbles(w.qs), x);
}

/**
 * @brief The integer-dot form of tile(): inputs rounded to 8 bits per block
 *        (BlockQ8Input), K walked a block at a time.
 *
 * Per block the policy sums the 32 products of small integers exactly, in
 * int32 lanes, and adds them, scaled by d_w·d_x, into an f32 accumulator;
 * Q4_1's minimum contributes m·s per block, summed apart. What it saves over
 * tile() on blocks: the conversion of every weight to f32 and its scaling
 * (two to four instructions per 16 weights), so a decode step is left with
 * the bytes to read. The policy provides `zero()`, `inputs(block)` (its 32
 * int8), `int8s(p)`, `nibbles(qs)` (32 in element order), `minus8(v)`,
 * `dot_signed(w, x)`, `dot_unsigned(w, x)`, `fma(acc, dot, scales)` (acc +
 * dot · scales[0]), `reduce(acc)`, and the scales as a small vector:
 * `weight_scales(block)` ([d, m, d, m] for Q4_1, d in every lane otherwise),
 * `input_scales(block)` ([d, s, d, s]), their product `mul`, `zero_scales()`,
 * `add` and `second(v)` (lane 1, where the m·s terms add up). The order of
 * the sums is fixed by the row alone, as in tile().
 */
template <typename Isa, int NR, int MR, typename Block>
[[gnu::noinline]] void tile(float* out, const BlockQ8Input* x, const BlockRows<Block>& w, int N, int K, int n, int m,
                            bool prefetch) {
  constexpr bool kHasMin = requires(const Block& b) { b.m; };
  // One prefetch per 64-byte line of a row's blocks (Q8_0: every block; Q4_0, Q4_1: every third).
  constexpr int kPrefetchBlocks = sizeof(Block) >= 64 ? 1 : static_cast<int>(64 / sizeof(Block));
  const int blocks = K / kQuantBlock;
  decltype(Isa::zero()) acc[NR][MR];
  decltype(Isa::zero_scales()) mins[NR][MR];
  for (int a = 0; a < NR; ++a)
    for (int b = 0; b < MR; ++b) acc[a][b] = Isa::zero(), mins[a][b] = Isa::zero_scales();
  for (int kb = 0; kb < blocks; ++kb) {
    decltype(Isa::inputs(*x)) xv[MR];
    decltype(Isa::input_scales(*x)) xs[MR];
    for (int b = 0; b < MR; ++b) {
      const BlockQ8Input& xb = x[static_cast<long>(m + b) * blocks + kb];
      xv[b] = Isa::inputs(xb);
      xs[b] = Isa::input_scales(xb);
    }
    const bool fetch = prefetch && kb % kPrefetchBlocks == 0;
    for (int a = 0; a < NR; ++a) {
      const Block& wb = *w.at(n + a, kb * kQuantBlock).block;
      if (fetch)
        _mm_prefetch(static_cast<const char*>(w.address(n + a + BlockRows<Block>::kRowsAhead, kb * kQuantBlock)),
                     _MM_HINT_T2);
      const auto ws = Isa::weight_scales(wb);
      for (int b = 0; b < MR; ++b) {
        const auto scales = Isa::mul(ws, xs[b]);  // [d_w·d_x, m·s, ...]
        acc[a][b] = Isa::fma(acc[a][b], block_dot<Isa>(wb, xv[b]), scales);
        if constexpr (kHasMin) mins[a][b] = Isa::add(mins[a][b], scales);
      }
    }
  }
  for (int a = 0; a < NR; ++a)
    for (int b = 0; b < MR; ++b)
      out[static_cast<long>(m + b) * N + n + a] = Isa::reduce(acc[a][b]) + (kHasMin ? Isa::second(mins[a][b]) : 0.0f);
}

/**
 * @brief One block of NR weight rows against all M inputs: tiles of
 *        Isa::kMaxInputs inputs, the rest in tiles of 2, then 1.
 *
 * A tile of one input reads its weight rows for that input alone, so with
 * kMaxInputs = 3 a remainder of one after a full tile is run as 2 + 2, not
 * 3 + 1. Only the last tile prefetches rows ahead (W::kRowsAhead).
 */
template <typename Isa, int NR, typename X, typename W>
inline void column_block(float* out, const X* x, const W& w, int M, int N, int K, int n, bool prefetch) {
  constexpr int MR = Isa::kMaxInputs;
  int full = M / MR;
  if (MR == 3 && M % MR == 1 && full > 0) --full;
  int m = 0;
  for (int t = 0; t < full; ++t, m += MR) tile<Isa, NR, MR>(out, x, w, N, K, n, m, prefetch && m + MR >= M);
  if constexpr (MR > 2)
    for (; m + 2 <= M; m += 2) tile<Isa, NR, 2>(out, x, w, N, K, n, m, prefetch && m + 2 >= M);
  for (; m < M; ++m) tile<Isa, NR, 1>(out, x, w, N, K, n, m, prefetch && m + 1 == M);
}

/// Weight rows [n0, n1) of @p w (PlainRows or BlockRows; f32, bf16 or BlockQ8Input inputs): 4-row tiles, then single rows.
template <typename Isa, typename X, typename W>
inline void rows(float* out, const X* x, const W& w, int M, int N, int K, int n0, int n1) {
  int n = n0;
  for (; n + 4 <= n1; n += 4) column_block<Isa, 4>(out, x, w, M, N, K, n, n + 4 + W::kRowsAhead <= N);
  for (; n < n1; ++n) column_block<Isa, 1>(out, x, w, M, N, K, n, false);
}

/**
 * @brief rows() over inputs @p x and weights of @p w_dtype: f32 inputs with f32,
 *        bf16 (uint16 bits) or, where the policy loads their blocks, Q8_0, Q4_0
 *        and Q4_1 weights; inputs rounded to 8 bits (BlockQ8Input) with the
 *        blocks alone, for the integer tile().
 */
template <typename Isa, typename X>
inline void rows_any(float* out, const X* x, const void* w, DType w_dtype, int M, int N, int K, int n0, int n1) {
  if constexpr (std::is_same_v<X, float>) {
    if (w_dtype == DType::F32)
      return rows<Isa>(out, x, PlainRows<float>{static_cast<const float*>(w), K}, M, N, K, n0, n1);
    if (w_dtype == DType::BF16)
      return rows<Isa>(out, x, PlainRows<std::uint16_t>{static_cast<const std::uint16_t*>(w), K}, M, N, K, n0, n1);
  }
  switch (w_dtype) {
    case DType::Q8_0:
      return rows<Isa>(out, x, BlockRows<BlockQ8_0>{static_cast<const BlockQ8_0*>(w), K}, M, N, K, n0, n1);
    case DType::Q4_0:
      return rows<Isa>(out, x, BlockRows<BlockQ4_0>{static_cast<const BlockQ4_0*>(w), K}, M, N, K, n0, n1);
    case DType::Q4_1:
      return rows<Isa>(out, x, BlockRows<BlockQ4_1>{static_cast<const BlockQ4_1*>(w), K}, M, N, K, n0, n1);
    default: break;
  }
}

}  // namespace servelab::cpu::tiling
