// SPDX-License-Identifier: MIT
/**
 * @file rows.h
 * @brief The row-wise GEMM kernels: out[m][n] = dot(x[m], w[n]) for a
 *        range of weight rows, one implementation per instruction set.
 *
 * What changed from the naive reference (gemm.h, matmul_reference()): the
 * dot products run on SIMD registers, four weight rows at a time against up
 * to four input rows, and bf16 weights are widened in registers instead of
 * in memory. What it removes: a decode step (M = 1) reads each weight once,
 * at close to memory bandwidth, which OpenBLAS's sgemm with M = 1 does not.
 * What is left: for large M, re-reading the inputs once per weight row makes
 * it slower than a blocked BLAS GEMM, which fast mode uses instead.
 *
 * Every dot product is accumulated in one register, over K in the same
 * order, whatever the tile it sits in: the result of row m is bit-identical
 * for any M and any thread split. That is the engine's deterministic mode.
 * Results differ between instruction sets (the lane count changes the order).
 */
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace servelab {
struct BlockQ8Input;
}

namespace servelab::cpu {

/**
 * @brief Signature shared by every instruction set's kernel.
 * @param out   [M, N] output, rows of N floats; only columns [n0, n1) are written.
 * @param x     [M, K] inputs.
 * @param w     [N, K] weights of @p w_dtype, row-major: f32, bf16 bits, or
 *              Q8_0/Q4_0/Q4_1 blocks (core/quant.h; K a multiple of 32),
 *              widened in registers to the floats dequantize() defines, so a
 *              quantized result equals the f32 kernel's on the dequantized weights.
 * @param w_dtype f32, bf16, q8_0, q4_0 or q4_1.
 */
using RowsKernel = void (*)(float* out, const float* x, const void* w, DType w_dtype, int M, int N, int K, int n0,
                            int n1);

void rows_generic(float* out, const float* x, const void* w, DType w_dtype, int M, int N, int K, int n0,
                  int n1);  ///< portable C++
void rows_avx2(float* out, const float* x, const void* w, DType w_dtype, int M, int N, int K, int n0,
               int n1);  ///< AVX2 + FMA (+ F16C for the block scales), 8 lanes
void rows_avx512(float* out, const float* x, const void* w, DType w_dtype, int M, int N, int K, int n0,
                 int n1);  ///< AVX-512F/BW/VL, 16 lanes

/**
 * @brief bf16 × bf16 row kernel on AVX512_BF16 (vdpbf16ps): the same tiles and
 *        contract as RowsKernel, with the inputs already rounded to bf16.
 *
 * What changed from rows_avx512() with bf16 weights: no widening. One
 * vdpbf16ps multiplies 32 weights by 32 inputs and adds the pairs into 16
 * f32 lanes, where the widening kernel spends a load, a zero-extension, a
 * shift and an FMA on every 16 weights. What it buys: weights already in
 * cache are multiplied 1.2-1.45× faster (measured on Zen 4, batch 1), and up
 * to 64 rows it beats oneDNN's bf16 GEMM (gemm.h). What it does not: a
 * decode step streaming its weights from memory is bound by the memory with
 * either kernel. What it costs: each input is rounded to bf16
 * (KernelContext::bf16_activations, the error bound of kernels/gemm_dnnl.h).
 * Still deterministic: a row's result does not depend on M or on the thread
 * split.
 * @param x [M, K] inputs as bf16 bits (f32_to_bf16()).
 * @param w [N, K] bf16 weights.
 */
void rows_avx512_bf16(float* out, const std::uint16_t* x, const std::uint16_t* w, int M, int N, int K, int n0, int n1);

/// True when rows_avx512_bf16() can run: the active instruction set is AVX-512 and the CPU has AVX512_BF16.
bool bf16_dot_supported();

/**
 * @brief Signature of the integer-dot row kernels: the contract of RowsKernel
 *        with the inputs rounded to 8 bits per block and quantized weights.
 *
 * What changed from RowsKernel on blocks: no weight is widened to f32. Each
 * block of 32 products is summed exactly in integers (vpdpbusd with
 * AVX512_VNNI, vpmaddubsw + vpmaddwd on AVX2) and scaled once, as llama.cpp
 * does. What it buys: the widening kernel spends three to five instructions
 * per 16 weights and is bound by them, not by the bytes it reads (docs/gguf.md).
 * What it costs: each input is rounded to 8 bits per block (quantize_inputs(),
 * error at most half a step of the block's scale), so the result is no longer
 * the f32 kernel's on the dequantized weights. Still deterministic: a row's
 * result depends on the row alone.
 * @param x [M, K / 32] input blocks (quantize_inputs() of each input row).
 * @param w [N, K] weights of @p w_dtype: Q8_0, Q4_0 or Q4_1 blocks.
 */
using RowsInt8Kernel = void (*)(float* out, const BlockQ8Input* x, const void* w, DType w_dtype, int M, int N, int K,
                                int n0, int n1);

void rows_int8_generic(float* out, const BlockQ8Input* x, const void* w, DType w_dtype, int M, int N, int K, int n0,
                       int n1);  ///< portable C++, one block after another: the reference
void rows_int8_avx2(float* out, const BlockQ8Input* x, const void* w, DType w_dtype, int M, int N, int K, int n0,
                    int n1);  ///< AVX2 (+ F16C): vpmaddubsw + vpmaddwd, 32 products per block in 8 int32 lanes
void rows_int8_avx512_vnni(float* out, const BlockQ8Input* x, const void* w, DType w_dtype, int M, int N, int K, int n0,
                           int n1);  ///< AVX512_VNNI on 256-bit vectors: one vpdpbusd per block

/**
 * @brief Signature of the widening kernels: rows [n0, n1) of quantized weights
 *        @p w ([N, K], Q8_0, Q4_0 or Q4_1 blocks; K a multiple of 32) as floats.
 * @param out [n1 - n0, K] floats, each dequantize()'s value of its element.
 */
using WidenKernel = void (*)(float* out, const void* w, DType w_dtype, int K, int n0, int n1);

void widen_generic(float* out, const void* w, DType w_dtype, int K, int n0,
                   int n1);  ///< dequantize_row(), one row after another: the reference
void widen_avx2(float* out, const void* w, DType w_dtype, int K, int n0, int n1);    ///< AVX2 + F16C, 8 at a time
void widen_avx512(float* out, const void* w, DType w_dtype, int K, int n0, int n1);  ///< AVX-512F, 16 at a time

/// Instruction sets a row kernel exists for, best first.
enum class Isa { Avx512, Avx2, Generic };

/// Name of @p isa ("avx512", "avx2", "generic").
const char* isa_name(Isa isa);
/// True when this CPU can run @p isa.
bool isa_supported(Isa isa);
/// The kernel for @p isa.
RowsKernel rows_kernel(Isa isa);
/// The widening kernel for @p isa.
WidenKernel widen_kernel(Isa isa);
/// True when this CPU has AVX512_VNNI (with AVX-512VL), which rows_int8_avx512_vnni() needs.
bool vnni_supported();
/// The integer-dot kernel for @p isa: with AVX-512, the VNNI kernel where the CPU has it, else AVX2's.
RowsInt8Kernel rows_int8_kernel(Isa isa);
/**
 * @brief The instruction set the engine uses: the best this CPU supports, or
 *        the one named by the environment variable SERVELAB_ISA
 *        (avx512, avx2, generic) when it is set and supported.
 */
Isa active_isa();

}  // namespace servelab::cpu
