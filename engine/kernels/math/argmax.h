/**
 * @file argmax.h
 * @brief The comparison behind greedy sampling, shared by the CPU sampler's
 *        contract and the CUDA argmax kernel's tree reduction.
 *
 * servelab::argmax() (model/sampler.h) returns the lowest index among equal
 * maxima. A GPU reduction compares candidates in a tree, in no fixed order,
 * so the tie rule has to live in the comparison itself: then every order
 * gives the same answer.
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

/// The winner of @p a and @p b: the larger value, the lower index on a tie.
SERVELAB_HD ArgmaxCandidate argmax_pick(ArgmaxCandidate a, ArgmaxCandidate b) {
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

}  // namespace servelab
