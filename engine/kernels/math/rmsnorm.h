// SPDX-License-Identifier: MIT
/**
 * @file rmsnorm.h
 * @brief RMSNorm and SwiGLU math shared by the CPU and CUDA kernels.
 *
 * RMSNorm of a row is split into its three steps so each backend can
 * reduce the sum of squares its own way (the CPU left to right, the GPU with
 * a block-wide tree) and still run the same code for the rest:
 * @verbatim
 *  sum_sq = Σ x_i²                      (the reduction: backend-specific order)
 *  inv    = rms_inv_from_sum_sq(sum_sq) (shared)
 *  out_i  = rmsnorm_scale(x_i, inv, w_i) (shared)
 * @endverbatim
 */
#pragma once

#include <cmath>

#include "core/hd.h"

namespace servelab {

/**
 * @brief \f$ 1/\sqrt{s/n + \epsilon} \f$: the RMSNorm factor from a row's sum of squares @p sum_sq.
 * @param n the row's length (> 0).
 */
SERVELAB_HD float rms_inv_from_sum_sq(float sum_sq, int n, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
}

/**
 * @brief \f$ 1/\sqrt{\mathrm{mean}(x^2) + \epsilon} \f$ for one row, summed left to right in f32.
 * @param x [n] the row.
 */
SERVELAB_HD float rms_inv(const float* x, int n, float eps) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += x[i] * x[i];
  return rms_inv_from_sum_sq(sum, n, eps);
}

/// One normalised element, in Hugging Face's order: weight * (x * rsqrt(var + eps)).
SERVELAB_HD float rmsnorm_scale(float x, float inv, float weight) { return weight * (x * inv); }

/// SiLU (swish): \f$ x \cdot \sigma(x) \f$, the gate activation of SwiGLU.
SERVELAB_HD float silu(float x) { return x / (1.0f + expf(-x)); }

/// One element of SwiGLU's gating: silu(gate) * up.
SERVELAB_HD float swiglu(float gate, float up) { return silu(gate) * up; }

}  // namespace servelab
