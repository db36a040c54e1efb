/**
 * @file gemm.h
 * @brief The engine's one GEMM seam: out = x · Wᵀ for a batch of rows.
 *
 * Every projection in the model (q/k/v/o, gate/up/down, LM head) goes
 * through matmul(), so the path, threading and reduction mode are chosen in
 * one place. Three implementations, from obviously right to fast:
 *
 * | function | how | used for |
 * |---|---|---|
 * | matmul_reference() | plain loops, one thread | the specification the tests compare against |
 * | matmul_rows() | SIMD dot products per output (cpu/rows.h), threads split the weight rows | decode, short prefills (see rows_kernel_max_m()) and deterministic mode |
 * | matmul_blas() | OpenBLAS sgemm per slice of weight rows, one slice per engine thread | long prefills in fast mode |
 *
 * Weights may be f32 or bf16; bf16 is widened in registers (rows) or per
 * tile into a scratch buffer (BLAS). Activations are always f32.
 */
#pragma once

#include "core/tensor.h"
#include "kernels/context.h"

namespace servelab {

/**
 * @brief Up to this many rows, fast mode uses matmul_rows() rather than OpenBLAS.
 *
 * Measured with lab 03 on a 2-core AVX-512 VM (qwen2.5-0.5b shapes): the
 * AVX-512 row kernels reach 240-270 GFLOP/s for 48 to 256 rows where OpenBLAS
 * (its AVX2 kernels, as this host pins them) reaches 170-210; the AVX2 row
 * kernels reach about 150 and lose to OpenBLAS above ~16 rows; for a handful
 * of rows sgemm streams the weights poorly on every machine.
 */
int rows_kernel_max_m();

/**
 * @brief \f$ out = x W^T \f$ (a `torch.nn.Linear` without bias).
 * @param out [M, N] result, overwritten.
 * @param x   [M, K] input rows.
 * @param w   [N, K] weight, f32 or bf16, row-major as stored by Hugging Face.
 * @param M   number of rows (tokens).
 *
 * Deterministic mode always takes matmul_rows(), whose row m is
 * bit-identical whatever M is; fast mode takes it for M <= rows_kernel_max_m()
 * and matmul_blas() above.
 */
void matmul(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M);

/// Row-wise SIMD path (see cpu/rows.h); same contract as matmul().
void matmul_rows(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M);

/// OpenBLAS path: each engine thread runs a single-threaded sgemm on its slice of W's rows.
void matmul_blas(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M);

/// The specification: a double loop with a plain running sum, one thread. Slow; for tests.
void matmul_reference(float* out, const float* x, const Tensor& w, int M);

/// Makes OpenBLAS single-threaded (once): every BLAS call runs inside one of the engine's threads.
void use_blas_inside_engine_threads();

/// Adds @p bias [N] to every row of @p out [M, N].
void add_bias(float* out, const float* bias, int M, int N);

}  // namespace servelab
