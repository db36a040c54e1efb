// SPDX-License-Identifier: MIT
/**
 * @file argmax.h
 * @brief The comparison behind greedy sampling, shared by the CPU sampler's
 *        contract and the CUDA argmax kernel's tree reduction.
 *
 * servelab::argmax() (model/sampler.h) returns the lowest index among equal
 * maxima. A GPU reduction compares candidates in a tree, in no fixed order,
 * so the tie rule has to live in the comparison itself: then every order
 * gives the same answer.
 *
 * NaN never wins: it loses to every number, infinities included, and among
 * NaNs the lowest index wins, so a row of NaNs (a broken step) still yields
 * index 0, a valid token, on both devices, instead of whatever index a
 * reduction's starting value held. An empty candidate (index < 0) is the
 * identity of the reduction.
 */
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace servelab {

/// A candidate of an argmax reduction: a value and where it came from.
struct ArgmaxCandidate {
  float value;         ///< the score
  std::int32_t index;  ///< its position in the row
};

/// The reduction's identity: no candidate yet.
inline constexpr std::int32_t kNoArgmax = -1;

/// The winner of @p a and @p b: the larger value, the lower index on a tie; a NaN loses to any number.
SERVELAB_HD ArgmaxCandidate argmax_pick(ArgmaxCandidate a, ArgmaxCandidate b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  const bool a_nan = a.value != a.value, b_nan = b.value != b.value;  // isnan, the same on host and device
  if (a_nan != b_nan) return a_nan ? b : a;
  if (b.value > a.value || ((b.value == a.value || a_nan) && b.index < a.index)) return b;
  return a;
}

}  // namespace servelab
