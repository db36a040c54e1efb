// SPDX-License-Identifier: MIT
/**
 * @file ops.h
 * @brief The element-wise and per-row CPU kernels of a decoder block.
 *
 * Shapes use T for the number of token rows in the batch. Each kernel reads
 * the per-element math from kernels/math/ so the CUDA kernels can share it.
 */
#pragma once

#include <cstddef>

#include "kernels/context.h"

namespace servelab {

/**
 * @brief RMSNorm: out[t] = x[t] / rms(x[t]) * weight.
 * @param out [T, n]; may alias @p x.
 * @param x   [T, n]
 * @param weight [n]
 */
void rmsnorm(const KernelContext& ctx, float* out, const float* x, const float* weight, int T, int n, float eps);

/**
 * @brief Applies RoPE in place to every head of every row.
 * @param x         [T, num_heads * head_dim] queries or keys.
 * @param positions [T] absolute position of each row's token.
 * @param inv_freq  [head_dim / 2] inverse frequencies.
 */
void rope(const KernelContext& ctx, float* x, const int* positions, int T, int num_heads, int head_dim,
          const float* inv_freq);

/**
 * @brief SwiGLU's gating on stacked projections: out[t][i] = silu(gate_up[t][i]) * gate_up[t][F + i].
 * @param out     [T, F]
 * @param gate_up [T, 2F]: each row holds the gate projection, then the up projection.
 */
void silu_mul(const KernelContext& ctx, float* out, const float* gate_up, int T, int F);

/// Residual connection: x[i] += y[i] for i < n.
void add_inplace(float* x, const float* y, std::size_t n);

}  // namespace servelab
