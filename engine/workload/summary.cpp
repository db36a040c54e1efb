// SPDX-License-Identifier: MIT
#include "workload/summary.h"

#include <algorithm>
#include <sstream>

namespace servelab {

WorkloadSummary summarize_workload(const std::vector<WorkloadRequest>& requests) {
  WorkloadSummary s;
  s.count = static_cast<int>(requests.size());
  if (requests.empty()) return s;
  std::vector<double> prompt, output;
  prompt.reserve(requests.size());
  output.reserve(requests.size());
  s.first_arrival_s = s.last_arrival_s = requests.front().arrival_s;
  for (const auto& r : requests) {
    prompt.push_back(static_cast<double>(r.prompt_ids.size()));
    output.push_back(r.max_tokens);
    s.prompt_tokens += static_cast<std::int64_t>(r.prompt_ids.size());
    s.output_tokens += r.max_tokens;
    s.first_arrival_s = std::min(s.first_arrival_s, r.arrival_s);
    s.last_arrival_s = std::max(s.last_arrival_s, r.arrival_s);
  }
  s.prompt_len = summarize(prompt);
  s.output_len = summarize(output);
  return s;
}

std::string WorkloadSummary::describe() const {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  auto lengths = [&](const char* name, const Summary& l, std::int64_t total) {
    os << " | " << name << " tokens mean " << l.mean << " p50 " << l.median << " p99 " << l.p99 << " (total " << total
       << ")";
  };
  os << count << " requests";
  lengths("prompt", prompt_len, prompt_tokens);
  lengths("output", output_len, output_tokens);
  os.precision(2);
  if (span_s() > 0)  // n arrivals over the span are n - 1 gaps: the offered rate
    os << " | arrivals over " << span_s() << " s (" << (count - 1) / span_s() << " req/s)";
  else
    os << " | all arrive at " << first_arrival_s << " s";
  return os.str();
}

}  // namespace servelab
