// SPDX-License-Identifier: MIT
#include "model/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "kernels/cpu/softmax_exp.h"
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

namespace {

// The largest logit, ignoring NaNs (-inf when every logit is NaN). Sixteen running maxima, so the
// compiler makes one vector max per 16 logits; a single one is a chain of dependent scalar maxes,
// 40% of a token's sampling. (maybe_unused: lab 01's starter stubs out its one caller.)
[[maybe_unused]] float max_logit(std::span<const float> logits) {
  constexpr std::size_t kLanes = 16;
  std::array<float, kLanes> lane;
  lane.fill(-std::numeric_limits<float>::infinity());
  std::size_t i = 0;
  for (; i + kLanes <= logits.size(); i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
  for (; i < logits.size(); ++i) lane[0] = logits[i] > lane[0] ? logits[i] : lane[0];
  float top = lane[0];
  for (const float m : lane) top = m > top ? m : top;
  return top;
}

}  // namespace

std::int32_t Sampler::sample(std::span<const float> logits) {
  // BEGIN LAB01 SOLUTION: Sampler::sample, greedy or a draw from softmax(logits / temperature) cut by top-k and top-p
  if (params_.temperature == 0.0f) return argmax(logits);
  // Candidates ranked by logit, highest first (index breaks ties so the order is total). The "hot"
  // ids, those within 9·T of the best logit (a softmax weight above e^-9, about 1e-4, of the best
  // one's), come first: they are the ranking's `hot` first places. The draw's walk nearly always stays
  // among them, so the ranking then selects among those few, not among all 50k.
  const float top_logit = max_logit(logits);
  const double top = top_logit, temperature = params_.temperature;
  const float hot_floor = static_cast<float>(top - 9.0 * temperature);
  std::vector<std::int32_t>& ids = ids_;
  std::vector<float>& cold_weights = cold_weights_;  // [vocab] exponents, then weights; -inf (adds ~0) at hot ids
  ids.resize(logits.size());
  cold_weights.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) cold_weights[i] = (logits[i] - top_logit) / params_.temperature;
  std::size_t hot = 0, cold = ids.size();
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const bool is_hot = logits[i] >= hot_floor;
    ids[is_hot ? hot++ : --cold] = static_cast<std::int32_t>(i);
    if (is_hot) cold_weights[i] = -std::numeric_limits<float>::infinity();
  }
  // Softmax at this temperature, as exp((l_i - l_max) / T): subtracting before dividing keeps a
  // tiny T finite. (l / T - l_max / T is inf - inf = NaN when T = 1e-38, and NaN made the least
  // likely token win.) With T that small every other token's term underflows to 0: greedy.
  // The hot ids' weights are libm's, in double, like every weight the draw reads; the rest only add
  // to the sum, each below 1e-4 of the best, so they are computed a vector at a time in float
  // (kernels/cpu/softmax_exp.h). libm's exp for all 50k ids was a fifth of a draw's time before.
  auto weight = [&](float logit) { return std::exp((logit - top) / temperature); };
  auto higher = [&](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  // The draw reads the ranking only down to where it lands, nearly always within the first few
  // hundred of 50k ids, so it is made as far as it is read: ids[0, ranked) are in order and rank
  // above every later id. (Sorting the whole vocabulary cost 3 ms a token, 40% of a serving step.)
  std::size_t keep = ids.size(), ranked = 0;
  auto rank_to = [&](std::size_t n) {
    if (n <= ranked) return;
    const std::size_t limit = n <= hot ? hot : keep;
    n = std::min(limit, std::max(n, 8 * ranked + 64));  // grows 8x, so a long walk costs few passes
    if (n < limit) std::nth_element(ids.begin() + ranked, ids.begin() + n, ids.begin() + limit, higher);
    std::sort(ids.begin() + ranked, ids.begin() + n, higher);
    ranked = n;
  };
  if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < keep) {
    keep = static_cast<std::size_t>(params_.top_k);
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), higher);
    ranked = keep;
  }
  // The sum in rank order once all the kept ids are ranked (top-k), else the sum of every weight.
  double sum = 0.0;
  if (keep < ids.size()) {
    for (std::size_t i = 0; i < keep; ++i) sum += weight(logits[ids[i]]);
  } else {
    sum = cpu::exp_sum_kernel(cpu::active_isa())(cold_weights.data(), static_cast<int>(cold_weights.size()), 0.0f);
    for (std::size_t i = 0; i < hot; ++i) sum += weight(logits[ids[i]]);
  }
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
