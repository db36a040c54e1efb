// SPDX-License-Identifier: MIT
/**
 * @file attention.h
 * @brief Per-score and per-row attention math shared by the CPU and CUDA
 *        kernels: the scaled dot product and the online softmax.
 *
 * The online softmax (Milakov & Gimelshein 2018; the core of flash
 * attention) keeps a running maximum m and a running sum l of
 * \f$ e^{s - m} \f$, so the softmax normaliser of a row is known after one
 * pass over its scores, in any order and in any number of pieces:
 * @verbatim
 *  add score s:   m' = max(m, s)    l' = l·e^(m - m') + e^(s - m')
 *  merge (a, b):  m  = max(ma, mb)  l  = la·e^(ma - m) + lb·e^(mb - m)
 * @endverbatim
 * The CUDA attention kernel gives each thread a share of the keys, has each
 * thread update its own state, and merges the states across the block; the
 * CPU tests check that any split gives the two-pass result.
 */
#pragma once

#include <cmath>

#include "core/hd.h"

namespace servelab {

/// \f$ 1/\sqrt{d} \f$, the score scale of a head of width @p head_dim.
SERVELAB_HD float attention_scale(int head_dim) { return 1.0f / sqrtf(static_cast<float>(head_dim)); }

/**
 * @brief \f$ \sum_i a_i b_i \f$ summed left to right in f32 (one query-key score before scaling).
 * @param a [n], @param b [n].
 */
SERVELAB_HD float dot(const float* a, const float* b, int n) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

/// Running maximum and normaliser of a softmax over the scores seen so far (none yet: max = -inf, sum = 0).
struct SoftmaxState {
  float max = -INFINITY;  ///< largest score seen
  float sum = 0.0f;       ///< \f$ \sum e^{s - max} \f$ over the scores seen
};

/// What an accumulator of weighted values must do when a score is added (flash attention's update).
struct SoftmaxStep {
  float rescale = 1.0f;  ///< multiply what was accumulated under the old max by this: \f$ e^{m - m'} \f$
  float weight = 0.0f;   ///< weight of the new score under the new max: \f$ e^{s - m'} \f$
};

/**
 * @brief Adds score @p s to @p state.
 * @return how an accumulator \f$ o = \sum e^{s_t - m} v_t \f$ follows: o' = o·rescale + weight·v.
 *         A score of -inf (a masked key) changes nothing.
 */
SERVELAB_HD SoftmaxStep online_softmax_update(SoftmaxState& state, float s) {
  SoftmaxStep step;
  if (s == -INFINITY) return step;
  if (s > state.max) {
    step.rescale = expf(state.max - s);  // 0 while the state is empty (max = -inf)
    step.weight = 1.0f;
    state.sum = state.sum * step.rescale + 1.0f;
    state.max = s;
  } else {
    step.weight = expf(s - state.max);
    state.sum += step.weight;
  }
  return step;
}

/// The state of the union of the scores behind @p a and @p b.
SERVELAB_HD SoftmaxState online_softmax_merge(SoftmaxState a, SoftmaxState b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return a;  // both empty: e^(-inf - -inf) would be NaN
  SoftmaxState merged;
  merged.max = m;
  merged.sum = a.sum * expf(a.max - m) + b.sum * expf(b.max - m);
  return merged;
}

}  // namespace servelab
