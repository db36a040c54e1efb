// SPDX-License-Identifier: MIT
#include "model/rope_freq.h"

#include <cmath>
#include <numbers>

namespace servelab {

std::vector<float> rope_inv_freq(const ModelConfig& c) {
  const int half = c.head_dim / 2;
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    // transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all in f32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(c.head_dim);
    inv[i] = 1.0f / std::pow(static_cast<float>(c.rope_theta), exponent);
  }
  if (c.rope_scaling.rope_type != "llama3") return inv;
  const RopeScaling& s = c.rope_scaling;
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / s.low_freq_factor;
  const double high_freq_wavelen = old_len / s.high_freq_factor;
  for (int i = 0; i < half; ++i) {
    const double f = inv[i];
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen < high_freq_wavelen) continue;  // short wavelengths: unchanged
    if (wavelen > low_freq_wavelen) {           // long wavelengths: stretched by factor
      inv[i] = static_cast<float>(f / s.factor);
      continue;
    }
    const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    inv[i] = static_cast<float>((1.0 - smooth) * f / s.factor + smooth * f);
  }
  return inv;
}

}  // namespace servelab
