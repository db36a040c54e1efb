/**
 * @file rmsnorm.h
 * @brief RMSNorm and SiLU math shared by the CPU and CUDA kernels.
 */
#pragma once

#include <cmath>

#include "core/hd.h"

namespace servelab {

/**
 * @brief \f$ 1/\sqrt{\mathrm{mean}(x^2) + \epsilon} \f$ for one row, summed left to right in f32.
 * @param x [n] the row.
 */
SERVELAB_HD float rms_inv(const float* x, int n, float eps) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += x[i] * x[i];
  return 1.0f / sqrtf(sum / static_cast<float>(n) + eps);
}

/// SiLU (swish): \f$ x \cdot \sigma(x) \f$, the gate activation of SwiGLU.
SERVELAB_HD float silu(float x) { return x / (1.0f + expf(-x)); }

}  // namespace servelab
