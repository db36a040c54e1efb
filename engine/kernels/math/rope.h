// SPDX-License-Identifier: MIT
/**
 * @file rope.h
 * @brief Rotary position embedding math shared by the CPU and CUDA kernels.
 *
 * Hugging Face's "rotate half" convention (Llama, Qwen2): a head vector x of
 * width d is split into halves, and pair (x[i], x[i + d/2]) is rotated by
 * the angle pos * inv_freq[i]:
 * \f[ x'_i = x_i \cos\theta - x_{i+d/2} \sin\theta,\quad
 *     x'_{i+d/2} = x_{i+d/2} \cos\theta + x_i \sin\theta \f]
 * Angles are computed in f32 exactly as transformers does (f32 position
 * times f32 inverse frequency), so logits agree to rounding.
 *
 * The CPU rotates a head with a loop over its pairs; the CUDA kernel gives
 * each pair its own thread. Both call rope_rotate_pair().
 */
#pragma once

#include <cmath>

#include "core/hd.h"

namespace servelab {

/// Rotation angle of pair @p inv_freq's index at position @p pos: f32 position times f32 inverse frequency.
SERVELAB_HD float rope_angle(int pos, float inv_freq) { return static_cast<float>(pos) * inv_freq; }

/**
 * @brief Rotates pair (x[i], x[i + half]) of one head by @p angle, in place.
 * @param x    [2 * half] the head.
 * @param half head_dim / 2.
 * @param i    pair index in [0, half).
 */
SERVELAB_HD void rope_rotate_pair(float* x, int half, int i, float angle) {
  const float c = cosf(angle), s = sinf(angle);
  const float a = x[i], b = x[i + half];
  x[i] = a * c - b * s;
  x[i + half] = b * c + a * s;
}

/**
 * @brief Rotates one head vector in place.
 * @param x        [head_dim] query or key head.
 * @param head_dim even width of the head.
 * @param inv_freq [head_dim / 2] inverse frequencies (after any RoPE scaling).
 * @param pos      absolute position of the token in its sequence.
 */
SERVELAB_HD void rope_rotate_head(float* x, int head_dim, const float* inv_freq, int pos) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) rope_rotate_pair(x, half, i, rope_angle(pos, inv_freq[i]));
}

}  // namespace servelab
