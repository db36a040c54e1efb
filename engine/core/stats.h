// SPDX-License-Identifier: MIT
/**
 * @file stats.h
 * @brief Statistics of repeated measurements: percentiles and the summary
 *        every lab table prints (median, p99, min, max), computed in one place.
 */
#pragma once

#include <vector>

namespace servelab {

/**
 * @brief The @p q-th percentile (0..100) with linear interpolation between
 *        closest ranks, as numpy.percentile's default.
 * @param samples values in any order; must not be empty.
 * @throws Error when @p samples is empty or @p q is outside [0, 100].
 */
double percentile(std::vector<double> samples, double q);

/// Summary of repeated measurements, in the samples' unit.
struct Summary {
  double median = 0;  ///< p50
  double p90 = 0;     ///< 90th percentile
  double p99 = 0;     ///< 99th percentile
  double min = 0;     ///< smallest sample
  double max = 0;     ///< largest sample
  double mean = 0;    ///< arithmetic mean
  int count = 0;      ///< number of samples
};

/// Summarises @p samples (must not be empty).
Summary summarize(const std::vector<double>& samples);

/**
 * @brief How far repeated measurements of a peak disagree: (max − min) / max.
 *
 * A roof is the most the machine can do, so every repeat of it should land
 * near the best; a large spread means something else ran while it was
 * measured (labs 03 and 06 warn then: a cost model fitted against such roofs
 * is not to be trusted).
 * @param samples rates (GFLOP/s, GB/s), all positive; must not be empty.
 * @return a fraction in [0, 1); 0 for a single sample.
 * @throws Error when @p samples is empty or holds a value that is not positive.
 */
double relative_spread(const std::vector<double>& samples);

}  // namespace servelab
