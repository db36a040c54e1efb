// SPDX-License-Identifier: MIT
#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "kernels/math/argmax.h"

namespace servelab {

void SamplingParams::validate() const {
  check(temperature >= 0.0f && std::isfinite(temperature), "--temperature must be >= 0, got ", temperature);
  check(top_k >= 0, "--top-k must be >= 0 (0 disables it), got ", top_k);
  check(top_p > 0.0f && top_p <= 1.0f, "--top-p must be in (0, 1], got ", top_p);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) { params_.validate(); }

double Sampler::uniform() { return unit_double(rng_()); }

void Sampler::skip(int num_samples) {
  // sample() draws exactly one number per token when not greedy.
  if (!greedy()) rng_.discard(static_cast<unsigned long long>(std::max(0, num_samples)));
}

std::int32_t argmax(std::span<const float> values) {
  // The GPU's comparison (kernels/math/argmax.h), so both pick the same token, NaN rows included.
  // BEGIN LAB01 SOLUTION: argmax, the greedy choice (lowest id on ties, a NaN never wins)
  ArgmaxCandidate best{0.0f, kNoArgmax};
  for (std::size_t i = 0; i < values.size(); ++i)
    best = argmax_pick(best, ArgmaxCandidate{values[i], static_cast<std::int32_t>(i)});
  return best.index < 0 ? 0 : best.index;
  // END LAB01 SOLUTION
}

std::int32_t Sampler::sample(std::span<const float> logits) {
  // BEGIN LAB01 SOLUTION: Sampler::sample, greedy or a draw from softmax(logits / temperature) cut by top-k and top-p
  if (params_.temperature == 0.0f) return argmax(logits);
  // Candidates ranked by logit, highest first (index breaks ties so the order is total).
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  auto higher = [&](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  // The draw reads the ranking only down to where it lands, nearly always within the first few
  // hundred of 50k ids, so it is made as far as it is read: ids[0, ranked) are in order and rank
  // above every later id. (Sorting the whole vocabulary cost 3 ms a token, 40% of a serving step.)
  std::size_t keep = ids.size(), ranked = 0;
  auto rank_to = [&](std::size_t n) {
    if (n <= ranked) return;
    n = std::min(keep, std::max(n, 8 * ranked + 64));  // grows 8x, so a long walk costs few passes
    if (n < keep) std::nth_element(ids.begin() + ranked, ids.begin() + n, ids.begin() + keep, higher);
    std::sort(ids.begin() + ranked, ids.begin() + n, higher);
    ranked = n;
  };
  if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < keep) {
    keep = static_cast<std::size_t>(params_.top_k);
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), higher);
    ranked = keep;
  }
  rank_to(1);
  // Softmax over the survivors at this temperature, as exp((l_i - l_max) / T):
  // subtracting before dividing keeps a tiny T finite. (l / T - l_max / T
  // is inf - inf = NaN when T = 1e-38, and NaN made the least likely token
  // win.) With T that small every other token's term underflows to 0: greedy.
  const double top = logits[ids[0]], temperature = params_.temperature;
  auto weight = [&](float logit) { return std::exp((logit - top) / temperature); };
  // The sum in rank order once all the kept ids are ranked (top-k, a small vocabulary), else in id
  // order: both are the same on every machine.
  double sum = 0.0;
  if (ranked == keep)
    for (std::size_t i = 0; i < keep; ++i) sum += weight(logits[ids[i]]);
  else
    for (const float logit : logits) sum += weight(logit);
  auto prob = [&](std::size_t rank) {
    rank_to(rank + 1);
    return weight(logits[ids[rank]]) / sum;
  };
  // Nucleus: the shortest prefix whose mass reaches top_p (always at least one token), renormalised.
  double mass = 1.0;
  if (params_.top_p < 1.0f) {
    mass = 0.0;
    std::size_t n = 0;
    while (n < keep && mass < params_.top_p) mass += prob(n++);
    keep = n;
  }
  const double u = uniform();
  double cdf = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    cdf += prob(i) / mass;
    if (u < cdf) return ids[i];
  }
  return ids[keep - 1];  // u fell in the rounding gap at the very top
  // END LAB01 SOLUTION
}

}  // namespace servelab
