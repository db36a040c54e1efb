// SPDX-License-Identifier: MIT
/**
 * @file gemm.h
 * @brief The engine's one GEMM seam: out = x · Wᵀ for a batch of rows.
 *
 * Every projection in the model (q/k/v/o, gate/up/down, LM head) goes
 * through matmul(), so the path, threading and reduction mode are chosen in
 * one place. Four implementations, from obviously right to fast:
 *
 * | function | how | used for |
 * |---|---|---|
 * | matmul_reference() | plain loops, one thread | the specification the tests compare against |
 * | matmul_rows() | SIMD dot products per output (cpu/rows.h), threads split the weight rows | decode, short prefills (see rows_kernel_max_m()) and deterministic mode |
 * | matmul_dnnl() | oneDNN matmul per slice of input rows, one slice per engine thread (gemm_dnnl.h) | long prefills in fast mode |
 * | matmul_blas() | OpenBLAS sgemm per slice of weight rows, one slice per engine thread | long prefills in fast mode without oneDNN |
 *
 * Weights may be f32, bf16 or block-quantized (Q8_0, Q4_0, Q4_1: core/quant.h).
 * Quantized blocks are widened in registers by the row kernels (decode reads
 * 0.56-1.06 bytes per weight instead of 4) and per tile for OpenBLAS in long
 * prefills (oneDNN is not given them). bf16 is widened in registers (rows), per
 * panel (BLAS, oneDNN), or, with KernelContext::bf16_activations, multiplied
 * in bf16 (rows and oneDNN, where the CPU has AVX512_BF16: vdpbf16ps).
 * Activations are f32 in and out.
 */
#pragma once

#include <string>

#include "core/tensor.h"
#include "kernels/context.h"

namespace servelab {

/**
 * @brief Up to this many rows, fast mode uses matmul_rows() rather than a
 *        library GEMM (oneDNN where built, else OpenBLAS).
 *
 * With oneDNN, measured on a 2-vCPU EPYC (Zen 4) VM on the qwen2.5-0.5b
 * shapes, one thread: with f32 weights the AVX-512 row kernels match
 * oneDNN's brgemm within noise up to ~128 rows (90-100 GFLOP/s) and lose by
 * 5-20% at 512, so the row kernels keep M <= 64. On AVX2, measured on a
 * 2-vCPU Zen 3 VM on SmolLM2-135M's shapes (30 layers, 2 threads), the
 * 4 × 3 tiles of rows_avx2() take 0.5-0.7× oneDNN's (gemm:jit) time at 17-24
 * rows, f32 or bf16 weights, 0.8-0.9× at 48 rows and 0.9-1.0× at 64; at 96
 * they win with f32 and lose with bf16 (1.09×), so they keep M <= 64 too
 * (bench/cpu_speed_bench's BM_BatchGemm checks this on the qwen shapes).
 * In bf16 arithmetic (9728 × 896, one
 * thread) the vdpbf16ps row kernel beats oneDNN's bf16 brgemm by 4× at 1-4
 * rows and 1.1× at 64 (153 against 137 GFLOP/s) and loses from 128 (149
 * against 166), so the same M <= 64 holds.
 * Without oneDNN, against OpenBLAS (measured with lab 03 on a 2-core
 * AVX-512 Xeon): AVX-512 row kernels up to 256 rows, AVX2 up to 16, generic
 * up to 4.
 */
int rows_kernel_max_m(const KernelContext& ctx, DType weight_dtype);

/**
 * @brief \f$ out = x W^T \f$ (a `torch.nn.Linear` without bias).
 * @param out [M, N] result, overwritten.
 * @param x   [M, K] input rows.
 * @param w   [N, K] weight, f32, bf16, q8_0, q4_0 or q4_1, row-major as stored by Hugging Face.
 * @param M   number of rows (tokens).
 *
 * Deterministic mode always takes matmul_rows(), whose row m is
 * bit-identical whatever M is; fast mode takes it for M <= rows_kernel_max_m(ctx, w.dtype)
 * and matmul_dnnl() above (matmul_blas() when dnnl_available() is false).
 */
void matmul(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M);

/// Row-wise SIMD path (see cpu/rows.h); same contract as matmul().
void matmul_rows(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M);

/// The three fast implementations matmul() chooses between.
enum class GemmPath { Rows, OneDnn, OpenBlas };

/// Name of @p path ("rows", "onednn", "openblas").
const char* gemm_path_name(GemmPath path);

/// The path matmul() takes for @p M rows of weights of @p weight_dtype in context @p ctx.
GemmPath matmul_path(const KernelContext& ctx, DType weight_dtype, int M);

/**
 * @brief The library kernel behind matmul_path() for this shape, for
 *        benchmarks to print: oneDNN's implementation name, OpenBLAS's core
 *        name (openblas_get_corename(), "Prescott" is its generic SSE3
 *        fallback), or the row kernel's instruction set.
 */
std::string matmul_kernel_name(const KernelContext& ctx, DType weight_dtype, int M, int N, int K);

/**
 * @brief The kernel set OpenBLAS picked for this CPU (openblas_get_corename()):
 *        "Prescott" is its generic SSE3 fallback for a CPU model it does not know.
 */
std::string openblas_core_name();

/// OpenBLAS path: each engine thread runs a single-threaded sgemm on its slice of W's rows (bf16 and
/// quantized rows widened to f32 64 at a time, blocks by the instruction set's cpu::widen_kernel()).
void matmul_blas(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M);

/// The specification: a double loop with a plain running sum, one thread. Slow; for tests.
void matmul_reference(float* out, const float* x, const Tensor& w, int M);

/// Makes OpenBLAS single-threaded (once): every BLAS call runs inside one of the engine's threads.
void use_blas_inside_engine_threads();

/// Adds @p bias [N] to every row of @p out [M, N].
void add_bias(float* out, const float* bias, int M, int N);

}  // namespace servelab
