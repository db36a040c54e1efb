// SPDX-License-Identifier: MIT
#include "core/random.h"

#include <cmath>

#include "core/error.h"

namespace servelab {

namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

int SplitMix64::uniform_int(int lo, int hi) {
  check(lo <= hi, "uniform_int: lo (", lo, ") must be <= hi (", hi, ")");
  const auto span = static_cast<std::uint64_t>(static_cast<std::int64_t>(hi) - lo) + 1;
  return static_cast<int>(lo + static_cast<std::int64_t>(next_u64() % span));
}

double SplitMix64::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: log(u1) is finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

double SplitMix64::exponential(double rate) { return -std::log1p(-uniform()) / rate; }

}  // namespace servelab
