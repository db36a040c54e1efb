/**
 * @file gemm.h
 * @brief The engine's one GEMM seam: out = x · Wᵀ for a batch of rows.
 *
 * Every projection in the model (q/k/v/o, gate/up/down, LM head) goes
 * through matmul(), so the backend, threading and reduction mode are chosen
 * in one place.
 */
#pragma once

#include "core/tensor.h"
#include "kernels/context.h"

namespace servelab {

/**
 * @brief \f$ out = x W^T \f$ (a `torch.nn.Linear` without bias).
 * @param out [M, N] result, overwritten.
 * @param x   [M, K] input rows.
 * @param w   [N, K] f32 weight, row-major as stored by Hugging Face.
 * @param M   number of rows (tokens).
 *
 * Fast mode calls OpenBLAS sgemm. Deterministic mode computes each output
 * element as one dot product in a fixed order (matmul_rowwise()), so row m
 * is bit-identical whatever M is.
 */
void matmul(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M);

/**
 * @brief The deterministic reference: each out[m][n] = dot(x[m], w[n]) with
 *        eight interleaved partial sums combined in a fixed tree.
 *
 * Same contract as matmul(); threads split the N outputs, never the K sum.
 */
void matmul_rowwise(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M);

/// Adds @p bias [N] to every row of @p out [M, N].
void add_bias(float* out, const float* bias, int M, int N);

}  // namespace servelab
