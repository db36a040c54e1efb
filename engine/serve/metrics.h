// SPDX-License-Identifier: MIT
/**
 * @file metrics.h
 * @brief Request latency metrics with vLLM's definitions, computed in one
 *        place from a request's timestamps, and their summary over a run.
 * @verbatim
 *  arrival   first scheduled   token 0        token 1      ...   token n-1 = finish
 *    |── queue ──|── prefill ──────|── ITL[0] ──|── ITL[1] ── ... ──|
 *    |──────────── TTFT ───────────|
 *    |──────────────────────────── E2E ───────────────────────────────|
 *  TPOT = (E2E - TTFT) / (n - 1): the mean ITL
 * @endverbatim
 */
#pragma once

#include <vector>

#include "core/stats.h"
#include "sched/request.h"

namespace servelab {

/// Latencies of one request, seconds.
struct RequestMetrics {
  double queue_time = 0;    ///< arrival → first scheduled
  double ttft = 0;          ///< arrival → first output token (time to first token)
  double tpot = 0;          ///< (E2E - TTFT) / (output tokens - 1); 0 with fewer than 2 tokens
  double e2e = 0;           ///< arrival → last output token
  std::vector<double> itl;  ///< [output tokens - 1] gaps between consecutive tokens (inter-token latency)
  int output_tokens = 0;    ///< tokens emitted

  /**
   * @brief Metrics of a request with at least one output token.
   * @throws Error when @p times has no token or was never scheduled.
   */
  static RequestMetrics from(const RequestTimes& times);
};

/// Service-level objectives a request must meet to count toward goodput, seconds; 0 = no limit.
struct SLO {
  double ttft = 0;  ///< most time to first token
  double tpot = 0;  ///< most time per output token
};

/// A serving run's headline numbers over finished requests.
struct ServingMetrics {
  int num_requests = 0;                 ///< requests with at least one token
  long output_tokens = 0;               ///< tokens emitted in all
  double duration = 0;                  ///< first arrival → last finish, seconds
  double output_tokens_per_second = 0;  ///< output_tokens / duration
  Summary ttft;                         ///< over requests, seconds
  Summary tpot;                         ///< over requests with 2+ tokens, seconds (zeros when none)
  Summary itl;                          ///< over every gap of every request, seconds (zeros when none)
  Summary e2e;                          ///< over requests, seconds
  double requests_per_second = 0;       ///< num_requests / duration
  int num_meeting_slo = 0;              ///< requests whose TTFT and TPOT met the SLO
  double goodput = 0;  ///< num_meeting_slo / duration: requests per second that met the SLO (DistServe)
};

/**
 * @brief Summarises @p requests (those without an output token are skipped).
 * @throws Error when none has an output token.
 */
ServingMetrics summarize_requests(const std::vector<const Request*>& requests, const SLO& slo = {});

/**
 * @brief Summarises requests by their timestamps alone (a benchmark client's
 *        view, on its own clock); entries without an output token are skipped.
 * @throws Error when none has an output token.
 */
ServingMetrics summarize_times(const std::vector<const RequestTimes*>& times, const SLO& slo = {});

}  // namespace servelab
