// SPDX-License-Identifier: MIT
#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace servelab {

double percentile(std::vector<double> samples, double q) {
  check(!samples.empty(), "percentile of an empty sample");
  check(q >= 0.0 && q <= 100.0, "percentile rank must be in [0, 100], got ", q);
  std::sort(samples.begin(), samples.end());
  const double rank = q / 100.0 * static_cast<double>(samples.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (rank - static_cast<double>(lo)) * (samples[hi] - samples[lo]);
}

Summary summarize(const std::vector<double>& samples) {
  check(!samples.empty(), "summary of an empty sample");
  Summary s;
  s.median = percentile(samples, 50.0);
  s.p90 = percentile(samples, 90.0);
  s.p99 = percentile(samples, 99.0);
  s.min = *std::min_element(samples.begin(), samples.end());
  s.max = *std::max_element(samples.begin(), samples.end());
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  s.count = static_cast<int>(samples.size());
  return s;
}

double relative_spread(const std::vector<double>& samples) {
  check(!samples.empty(), "spread of an empty sample");
  const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
  check(*lo > 0, "spread: every sample must be positive, got ", *lo);
  return (*hi - *lo) / *hi;
}

}  // namespace servelab
