// SPDX-License-Identifier: MIT
/**
 * @file latency.h
 * @brief Lab 06's one latency vocabulary: every table judges a run by the
 *        same two token-gap metrics against the same SLO.
 *
 * Two numbers describe how steadily a request streams:
 * @verbatim
 *  token   0      1      2      3      4          (one request)
 *          |─ g0 ─|─ g1 ─|──── g2 ────|─ g3 ─|    g2: a step that carried a prompt
 *  ITL / TBT: every gap g0..g3, pooled over all requests; its p99 is the
 *             prefill/decode article's "TPOT p99" and Sarathi-Serve's P99 TBT
 *  TPOT (vLLM): one mean per request, (g0 + g1 + g2 + g3) / 4; its p99 is over requests,
 *             so a single stall is diluted by the request's other gaps
 * @endverbatim
 * The SLO is a TTFT limit and a token-gap limit. A run meets it when its
 * TTFT p99 and its ITL p99 are within them (Sarathi-Serve's capacity), or,
 * in vLLM's reading, its TTFT p99 and TPOT p99. Goodput counts requests
 * (DistServe): in the ITL reading a request counts when its TTFT and every
 * one of its gaps are within the limits, in the TPOT reading when its TTFT
 * and its mean gap are.
 */
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "serve/metrics.h"

namespace servelab::lab06 {

/// The limits a table judges its runs by, seconds (both > 0).
struct LatencySLO {
  double ttft = 0;  ///< most time to first token
  double tbt = 0;   ///< most time between two tokens (Sarathi-Serve's TBT; applied to TPOT in vLLM's reading)

  /// "TTFT <= 1000 ms, token gap <= 15 ms".
  std::string describe() const {
    return "TTFT <= " + std::to_string(static_cast<long>(ttft * 1e3 + 0.5)) +
           " ms, token gap <= " + std::to_string(static_cast<long>(tbt * 1e3 + 0.5)) + " ms";
  }
};

/// One run in the lab's vocabulary: the summaries, and both readings of the SLO.
struct RunLatency {
  ServingMetrics m{};       ///< TTFT, TPOT (per-request mean), ITL (every gap) summaries, throughput
  double goodput_itl = 0;   ///< req/s whose TTFT and every token gap met the SLO
  double goodput_tpot = 0;  ///< req/s whose TTFT and TPOT (mean gap) met the SLO: vLLM's and DistServe's reading
  bool meets_itl = false;   ///< TTFT p99 and ITL p99 within the SLO (Sarathi-Serve's capacity criterion)
  bool meets_tpot = false;  ///< TTFT p99 and TPOT p99 within the SLO
};

/**
 * @brief Summarises @p requests (those without a token skipped) and judges them by @p slo.
 * @throws Error when none has an output token.
 */
inline RunLatency run_latency(const std::vector<const Request*>& requests, const LatencySLO& slo) {
  RunLatency out;
  out.m = summarize_requests(requests, SLO{slo.ttft, slo.tbt});  // its goodput is the TPOT reading
  int stall_free = 0;
  for (const Request* r : requests) {
    if (r->times.token_times.empty()) continue;
    const RequestMetrics rm = RequestMetrics::from(r->times);
    const double worst_gap = rm.itl.empty() ? 0.0 : *std::ranges::max_element(rm.itl);
    stall_free += rm.ttft <= slo.ttft && worst_gap <= slo.tbt;
  }
  out.goodput_tpot = out.m.goodput;
  out.goodput_itl = out.m.duration > 0 ? stall_free / out.m.duration : 0.0;
  out.meets_itl = out.m.ttft.p99 <= slo.ttft && out.m.itl.p99 <= slo.tbt;
  out.meets_tpot = out.m.ttft.p99 <= slo.ttft && out.m.tpot.p99 <= slo.tbt;
  return out;
}

}  // namespace servelab::lab06
