// SPDX-License-Identifier: MIT
#include "workload/arrivals.h"

#include <cmath>

#include "core/error.h"
#include "workload/text.h"

namespace servelab {

std::string Arrivals::describe() const {
  switch (kind) {
    case Kind::all: return "all";
    case Kind::poisson: return "poisson:" + shortest_text(rate);
    case Kind::trace: return "trace:" + trace_path;
  }
  return "?";
}

Arrivals parse_arrivals(std::string_view text, std::string_view flag) {
  const FlagText ft{flag, text, "all, poisson:RATE (requests/s) or trace:PATH"};
  if (text == "all") return {};
  if (text.starts_with("poisson:")) {
    const double rate = ft.real(text.substr(8), "RATE");
    if (!(std::isfinite(rate) && rate > 0)) ft.bad("RATE must be a positive finite number of requests/s, got ", rate);
    Arrivals a;
    a.kind = Arrivals::Kind::poisson, a.rate = rate;
    return a;
  }
  if (text.starts_with("trace:") && text.size() > 6)  // a path may hold ':', so split once only
    return {.kind = Arrivals::Kind::trace, .trace_path = std::string(text.substr(6))};
  ft.bad("unknown arrival process");
}

std::vector<double> read_arrival_trace(const std::string& path) {
  const std::string text = read_limited(path, "arrival trace");
  const auto lines = content_lines(text, path);
  std::vector<double> times;
  times.reserve(lines.size());
  for (const auto& [number, raw] : lines) {
    const std::size_t first = raw.find_first_not_of(" \t"), last = raw.find_last_not_of(" \t");
    const auto t = to_number<double>(raw.substr(first, last - first + 1));
    check(t && std::isfinite(*t) && *t >= 0, path, ":", number, ": expected an arrival time in seconds >= 0, got '",
          raw, "'");
    times.push_back(*t);
  }
  return times;
}

}  // namespace servelab
