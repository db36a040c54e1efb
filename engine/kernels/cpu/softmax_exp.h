// SPDX-License-Identifier: MIT
/**
 * @file softmax_exp.h
 * @brief The exponentials of the online softmax, P = e^(S − m), a vector at a
 *        time: one implementation per instruction set, chosen as the row
 *        kernels are (rows.h).
 *
 * What changed from libm: flash_add_key_tile() (attention_v3_flash.cpp) calls
 * expf once per score, and a decode step has as many scores as query heads
 * times keys. Measured on a 2-vCPU Zen 4, one thread, split-K decode of one
 * layer: with libm those calls took about as long as the tile's two sgemms.
 * Here a vector of scores is exponentiated with a polynomial
 * (tiling::exp_nonpositive()) and summed in registers.
 *
 * | heads (query:KV, d 64), keys | libm expf | this kernel |
 * |---|---:|---:|
 * | 14:2 (qwen2.5-0.5b), 1 sequence of 128 | 14.0 µs | 9.0 µs |
 * | 14:2, 1 sequence of 1,024 | 112 µs | 70 µs |
 * | 9:3 (SmolLM2-135M), 16 sequences of 192, paged | 295 µs | 211 µs |
 *
 * Register kernels for the tile's products (a dot product per score, four
 * keys per horizontal sum) were tried in place of sgemm at the same time and
 * were no faster on one layer whose cache stayed in L2 and L3 (88 against
 * 70 µs at 1,024 keys; 213 against 211 µs on SmolLM2's shape). With 30
 * layers' caches in DRAM, as in serving, they were: a decode's products now
 * run on attention_tile.h's kernels.
 * Deterministic mode keeps libm (attention_exp_sum_generic()): its rounding
 * is the one the bit-for-bit tests were written against.
 */
#pragma once

#include "kernels/cpu/rows.h"

namespace servelab::cpu {

/**
 * @brief p[j] = e^(p[j] − @p max) for j < @p n; returns their sum (a softmax
 *        row's numerators and its share of the denominator).
 * @param max at least every p[j] (the row's running max), so every exponent is ≤ 0.
 */
using ExpSumKernel = float (*)(float* p, int n, float max);

/// libm's expf one score at a time, summed left to right: the reference, and deterministic mode's.
float exp_sum_generic(float* p, int n, float max);
float exp_sum_avx2(float* p, int n, float max);    ///< AVX2 + FMA: tiling::exp_nonpositive(), 8 lanes
float exp_sum_avx512(float* p, int n, float max);  ///< AVX-512F: tiling::exp_nonpositive(), 16 lanes

/// The kernel for @p isa.
ExpSumKernel exp_sum_kernel(Isa isa);

}  // namespace servelab::cpu
