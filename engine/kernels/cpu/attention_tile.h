// SPDX-License-Identifier: MIT
/**
 * @file attention_tile.h
 * @brief The two products of a flash-attention key tile for a few query rows,
 *        S = scale · Q Kᵀ and Õ += P V, on SIMD registers: one implementation
 *        per instruction set, chosen as the row kernels are (rows.h).
 *
 * What changed from OpenBLAS's sgemm (attention_v3_flash.cpp): a decode's
 * tile is the GQA group's few query rows (3 for SmolLM2-135M, 7 for
 * qwen2.5-0.5b) against one block's 16 keys, far too small for a library
 * GEMM, which packs both operands and takes a lock for its buffers on every
 * call. These kernels read each key and value row once, straight from the
 * paged cache, for up to four query rows at a time.
 *
 * Measured on a 2-vCPU Zen 3 VM (AVX2), split-K decode of one step over
 * SmolLM2-135M's 30 layers, 9:3 heads of 64, paged in blocks of 16 in
 * shuffled order, each layer's cache in its own memory (so K and V come from
 * DRAM, as in serving), median of 15 steps:
 *
 * | sequences × keys, threads | sgemm | these kernels |
 * |---|---:|---:|
 * | 1 × 192, 2 | 0.93 ms | 0.58 ms |
 * | 4 × 192, 2 | 3.94 ms | 2.83 ms |
 * | 16 × 192, 2 | 17.8-18.7 ms | 12.3-12.9 ms |
 * | 16 × 192, 1 | 29.6 ms | 25.7 ms |
 *
 * An earlier trial of register kernels (softmax_exp.h) found them no faster,
 * but timed one layer whose cache stayed in L2 and L3: there the sgemm's
 * overhead was hidden by cache hits. Under serving at 16 streams the
 * sgemms took a quarter of the process's samples (perf, 2 threads).
 *
 * Larger tiles (a prefill's 64 query rows) still go to sgemm: there its
 * packing pays for itself. Neither is deterministic mode's path, which sums
 * each score and each output left to right (attention_v3_flash.cpp).
 */
#pragma once

#include <cstddef>

#include "kernels/cpu/rows.h"

namespace servelab::cpu {

/**
 * @brief s[r·lds + j] = scale · dot(q_r, k_j) for r < rows and j < n.
 * @param q [rows] query rows of D floats, row r at q + r·ldq.
 * @param k [n] key rows of D floats, row j at k + j·ldk.
 */
using TileScoresKernel = void (*)(float* s, int lds, const float* q, int ldq, int rows, const float* k, std::size_t ldk,
                                  int n, int D, float scale);

/**
 * @brief o_r += Σ_j p[r·ldp + j] · v_j for r < rows (Õ += P·V over one run of keys).
 * @param o [rows] accumulator rows of D floats, row r at o + r·ldo.
 * @param v [n] value rows of D floats, row j at v + j·ldv.
 */
using TileValuesKernel = void (*)(float* o, int ldo, const float* p, int ldp, int rows, const float* v, std::size_t ldv,
                                  int n, int D);

/// Both products of one instruction set.
struct TileKernels {
  TileScoresKernel scores;  ///< S = scale · Q Kᵀ
  TileValuesKernel values;  ///< Õ += P V
};

/**
 * @brief Most query rows a tile may have to run on these kernels; larger tiles go to sgemm.
 *
 * Measured at a decode's 3 rows only (SmolLM2-135M), where these kernels are faster; a prefill's 64-row query
 * tiles were left on sgemm untimed. 16 covers a decode's GQA group on the presets (up to 7 rows) and a few
 * tokens of a short chunk; where the two cross between 7 and 64 rows has not been measured.
 */
constexpr int kTileKernelMaxRows = 16;

void tile_scores_avx2(float* s, int lds, const float* q, int ldq, int rows, const float* k, std::size_t ldk, int n,
                      int D, float scale);  ///< AVX2 + FMA, 8 lanes
void tile_values_avx2(float* o, int ldo, const float* p, int ldp, int rows, const float* v, std::size_t ldv, int n,
                      int D);  ///< AVX2 + FMA, 8 lanes
void tile_scores_avx512(float* s, int lds, const float* q, int ldq, int rows, const float* k, std::size_t ldk, int n,
                        int D, float scale);  ///< AVX-512F, 16 lanes
void tile_values_avx512(float* o, int ldo, const float* p, int ldp, int rows, const float* v, std::size_t ldv, int n,
                        int D);  ///< AVX-512F, 16 lanes

/// The kernels of @p isa; null members for Isa::Generic, whose tiles stay on sgemm.
TileKernels tile_kernels(Isa isa);

}  // namespace servelab::cpu
