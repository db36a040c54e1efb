// SPDX-License-Identifier: MIT
#include "serve/metrics.h"

#include <algorithm>

#include "core/error.h"

namespace servelab {

RequestMetrics RequestMetrics::from(const RequestTimes& t) {
  check(!t.token_times.empty(), "request metrics: the request emitted no token");
  check(t.first_scheduled >= 0, "request metrics: the request was never scheduled");
  RequestMetrics m;
  m.output_tokens = static_cast<int>(t.token_times.size());
  m.queue_time = t.first_scheduled - t.arrival;
  m.ttft = t.token_times.front() - t.arrival;
  m.e2e = t.token_times.back() - t.arrival;
  for (std::size_t i = 1; i < t.token_times.size(); ++i) m.itl.push_back(t.token_times[i] - t.token_times[i - 1]);
  if (m.output_tokens >= 2) m.tpot = (m.e2e - m.ttft) / (m.output_tokens - 1);
  return m;
}

ServingMetrics summarize_requests(const std::vector<const Request*>& requests, const SLO& slo) {
  std::vector<const RequestTimes*> times;
  for (const Request* r : requests) times.push_back(&r->times);
  return summarize_times(times, slo);
}

ServingMetrics summarize_times(const std::vector<const RequestTimes*>& times, const SLO& slo) {
  ServingMetrics s;
  std::vector<double> ttft, tpot, itl, e2e;
  double first_arrival = 0, last_token = 0;
  for (const RequestTimes* t : times) {
    if (t->token_times.empty()) continue;
    const RequestMetrics m = RequestMetrics::from(*t);
    first_arrival = s.num_requests == 0 ? t->arrival : std::min(first_arrival, t->arrival);
    last_token = s.num_requests == 0 ? t->token_times.back() : std::max(last_token, t->token_times.back());
    ++s.num_requests;
    s.output_tokens += m.output_tokens;
    if ((slo.ttft <= 0 || m.ttft <= slo.ttft) && (slo.tpot <= 0 || m.tpot <= slo.tpot)) ++s.num_meeting_slo;
    ttft.push_back(m.ttft);
    e2e.push_back(m.e2e);
    if (m.output_tokens >= 2) tpot.push_back(m.tpot);
    itl.insert(itl.end(), m.itl.begin(), m.itl.end());
  }
  check(s.num_requests > 0, "serving metrics: no request emitted a token");
  s.duration = last_token - first_arrival;
  s.output_tokens_per_second = s.duration > 0 ? static_cast<double>(s.output_tokens) / s.duration : 0.0;
  s.requests_per_second = s.duration > 0 ? s.num_requests / s.duration : 0.0;
  s.goodput = s.duration > 0 ? s.num_meeting_slo / s.duration : 0.0;
  s.ttft = summarize(ttft);
  s.e2e = summarize(e2e);
  if (!tpot.empty()) s.tpot = summarize(tpot);
  if (!itl.empty()) s.itl = summarize(itl);
  return s;
}

}  // namespace servelab
