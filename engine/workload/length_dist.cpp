// SPDX-License-Identifier: MIT
#include "workload/length_dist.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "workload/text.h"

namespace servelab {

namespace {

LengthDist checked(const LengthDist& d) {
  const std::string why = d.problem();
  check(why.empty(), "length distribution ", d.describe(), ": ", why);
  return d;
}

}  // namespace

std::string LengthDist::problem() const {
  std::ostringstream os;
  const int top = kMaxWorkloadTokens;
  if (min < 1 || max < 1 || min > top || max > top)
    os << "lengths must be in [1, " << top << "] tokens, got [" << min << ", " << max << "]";
  else if (min > max)
    os << "the lower bound " << min << " is above the upper bound " << max;
  else if (kind == Kind::fixed && min != max)
    os << "a fixed length has min == max";
  else if (kind == Kind::lognormal && !(std::isfinite(median) && median > 0 && median <= top))
    os << "MEDIAN must be a number in (0, " << top << "], got " << median;
  else if (kind == Kind::lognormal && !(std::isfinite(sigma) && sigma >= 0))
    os << "SIGMA must be a finite number >= 0, got " << sigma;
  return os.str();
}

LengthDist LengthDist::fixed(int n) { return checked({.kind = Kind::fixed, .min = n, .max = n}); }

LengthDist LengthDist::uniform(int lo, int hi) { return checked({.kind = Kind::uniform, .min = lo, .max = hi}); }

LengthDist LengthDist::lognormal(double median, double sigma, int min, int max) {
  return checked({.kind = Kind::lognormal, .min = min, .max = max, .median = median, .sigma = sigma});
}

int LengthDist::sample(SplitMix64& rng) const {
  switch (kind) {
    case Kind::fixed: return min;
    case Kind::uniform: return rng.uniform_int(min, max);
    case Kind::lognormal: {
      // length = median * e^(sigma Z), clamped in double first so a far tail cannot overflow the int.
      const double x = median * std::exp(sigma * rng.normal());
      return static_cast<int>(std::lround(std::clamp(x, static_cast<double>(min), static_cast<double>(max))));
    }
  }
  return min;
}

std::string LengthDist::describe() const {
  switch (kind) {
    case Kind::fixed: return "fixed:" + std::to_string(min);
    case Kind::uniform: return "uniform:" + std::to_string(min) + ":" + std::to_string(max);
    case Kind::lognormal:
      return "lognormal:" + shortest_text(median) + ":" + shortest_text(sigma) + ":" + std::to_string(min) + ":" +
             std::to_string(max);
  }
  return "?";
}

// See the header for the sources: vLLM paper's ShareGPT means (161 in, 338 out), SIGMA 1 our
// assumption, MEDIAN = mean / e^(1/2), bounds from vLLM's benchmark filter.
LengthDist sharegpt_prompt_lengths() { return LengthDist::lognormal(98, 1.0, 4, 1024); }
LengthDist sharegpt_output_lengths() { return LengthDist::lognormal(205, 1.0, 4, 1024); }

LengthDist parse_length_dist(std::string_view text, LengthRole role, std::string_view flag) {
  const FlagText ft{flag, text, "fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA[:MIN:MAX] or sharegpt"};
  const auto parts = split_at(text, ':');
  const std::string_view kind = parts[0];
  LengthDist d;
  if (kind == "sharegpt" && parts.size() == 1) {
    return role == LengthRole::prompt ? sharegpt_prompt_lengths() : sharegpt_output_lengths();
  } else if (kind == "fixed" && parts.size() == 2) {
    d = {.kind = LengthDist::Kind::fixed, .min = ft.integer(parts[1], "N")};
    d.max = d.min;
  } else if (kind == "uniform" && parts.size() == 3) {
    d = {.kind = LengthDist::Kind::uniform, .min = ft.integer(parts[1], "LO"), .max = ft.integer(parts[2], "HI")};
  } else if (kind == "lognormal" && (parts.size() == 3 || parts.size() == 5)) {
    d = {.kind = LengthDist::Kind::lognormal,
         .min = 1,
         .max = kMaxWorkloadTokens,
         .median = ft.real(parts[1], "MEDIAN"),
         .sigma = ft.real(parts[2], "SIGMA")};
    if (parts.size() == 5) d.min = ft.integer(parts[3], "MIN"), d.max = ft.integer(parts[4], "MAX");
  } else {
    ft.bad("unknown distribution or wrong number of ':'-separated fields");
  }
  if (const std::string why = d.problem(); !why.empty()) ft.bad(why);
  return d;
}

}  // namespace servelab
