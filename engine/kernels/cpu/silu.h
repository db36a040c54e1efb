// SPDX-License-Identifier: MIT
/**
 * @file silu.h
 * @brief SwiGLU's gate, out[i] = silu(gate[i]) · up[i], a vector at a time:
 *        one implementation per instruction set, chosen as the row kernels
 *        are (rows.h).
 *
 * What changed from kernels/math/rmsnorm.h's swiglu(): libm's expf once per
 * element. A step of 16 decodes of SmolLM2-135M gates 16 × 1,536 elements in
 * each of 30 layers; at 16 streams under aiperf that loop and its expf calls
 * were 3.8% of serve's samples (perf, 2-vCPU Zen 3). Here e^(−x) comes from
 * tiling::exp_nonpositive()'s polynomial (within 4·10⁻⁷ of e^x), so silu is
 * within about 5·10⁻⁷ of the libm form.
 * Deterministic mode keeps the libm form (silu_mul_generic()): the rounding
 * the bit-for-bit tests know, and the CUDA kernels' formula.
 */
#pragma once

#include "kernels/cpu/rows.h"

namespace servelab::cpu {

/**
 * @brief out[i] = silu(gate[i]) · up[i] for i < @p n, silu(x) = x / (1 + e^(−x)).
 * @param out [n]; @param gate [n]; @param up [n] (out may alias neither).
 */
using SiluMulKernel = void (*)(float* out, const float* gate, const float* up, int n);

/// swiglu() of kernels/math/rmsnorm.h one element at a time (libm's expf): the reference, and deterministic mode's.
void silu_mul_generic(float* out, const float* gate, const float* up, int n);
void silu_mul_avx2(float* out, const float* gate, const float* up, int n);    ///< AVX2 + FMA, 8 lanes
void silu_mul_avx512(float* out, const float* gate, const float* up, int n);  ///< AVX-512F, 16 lanes

/// The kernel for @p isa.
SiluMulKernel silu_mul_kernel(Isa isa);

}  // namespace servelab::cpu
