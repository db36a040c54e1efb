// SPDX-License-Identifier: MIT
/**
 * @file summary.h
 * @brief What a lab prints about its workload: counts, length statistics and
 *        the span of arrivals, in one line of its settings block.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/stats.h"
#include "workload/workload.h"

namespace servelab {

/// What a lab prints about its workload: counts, length statistics, the arrival span.
struct WorkloadSummary {
  int count = 0;                   ///< requests
  std::int64_t prompt_tokens = 0;  ///< sum of prompt lengths
  std::int64_t output_tokens = 0;  ///< sum of max_tokens
  Summary prompt_len;              ///< prompt lengths, tokens (zeros when count == 0)
  Summary output_len;              ///< max_tokens, tokens (zeros when count == 0)
  double first_arrival_s = 0;      ///< earliest arrival, seconds
  double last_arrival_s = 0;       ///< latest arrival, seconds

  /// last - first arrival, seconds (0 for `all`).
  double span_s() const { return last_arrival_s - first_arrival_s; }
  /// One line: `64 requests | prompt mean 157 p50 98 p99 1024 | output ... | arrivals over 31.2 s (2.05 req/s)`.
  std::string describe() const;
};

/// Summarises @p requests (any order; an empty list gives count 0 and zeros).
WorkloadSummary summarize_workload(const std::vector<WorkloadRequest>& requests);

}  // namespace servelab
