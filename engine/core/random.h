// SPDX-License-Identifier: MIT
/**
 * @file random.h
 * @brief The project's one seeded random generator: SplitMix64, as a stream
 *        (workloads, arrival gaps, test data) and as a counter-based hash
 *        (synthetic weights, where element i needs no state from element i-1).
 *
 * Steele, Lea and Flood's SplitMix64 (the seeding generator of Java's
 * SplittableRandom and of xoshiro): one 64-bit counter advanced by the golden
 * ratio constant, then a bijective mix. Every seed, including 0, gives a
 * full-period stream.
 * @verbatim
 *  state s, gamma = 0x9e3779b97f4a7c15 (2^64 / golden ratio)
 *  next_u64():  s += gamma;  return mix64(s)
 *  splitmix64(x) = mix64(x + gamma)      the first output of a stream seeded with x
 *  output i of the stream seeded with s = mix64(s + (i + 1) * gamma)
 * @endverbatim
 *
 * Every draw comes from here, not from `<random>`: the C++ standard fixes the
 * engines' output but not the distributions' algorithms, so
 * std::normal_distribution gives different numbers under libstdc++ and libc++.
 * Integer draws are therefore identical everywhere; the few transcendental
 * functions (log, exp, cos) come from the platform's libm, which may differ in
 * the last bit.
 *
 * Two streams are not SplitMix64, each kept because results people compare
 * depend on its numbers: the Sampler's std::mt19937_64 (every sampled token of
 * a seeded request, model/sampler.h) and synthetic_prompt()'s MMIX LCG (every
 * synthetic prompt id, so every lab's token hash). Tests and lab 05 draw their
 * random inputs from std::mt19937 with std distributions; those inputs are
 * only ever compared within one run.
 */
#pragma once

#include <cstdint>

namespace servelab {

/// SplitMix64's increment: 2^64 divided by the golden ratio, odd.
inline constexpr std::uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ull;

/// SplitMix64's output function (Stafford's Mix13): a bijection, so distinct inputs give distinct outputs.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// The first output of the stream seeded with @p x: a stateless hash, so element i of a keyed array is splitmix64(key + i).
constexpr std::uint64_t splitmix64(std::uint64_t x) { return mix64(x + kSplitMixGamma); }

/// A double in [0, 1) from the top 53 of @p bits (every value a multiple of 2^-53).
constexpr double unit_double(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

/// A SplitMix64 stream, plus the transforms the workloads and tests draw with.
class SplitMix64 {
 public:
  /// A stream starting from @p seed.
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  /// The next 64 random bits.
  std::uint64_t next_u64() {
    const std::uint64_t out = splitmix64(state_);
    state_ += kSplitMixGamma;
    return out;
  }
  /// Uniform double in [0, 1), from the top 53 bits of one draw.
  double uniform() { return unit_double(next_u64()); }
  /**
   * @brief Uniform integer in [lo, hi], both inclusive (modulo bias below 2^-32 for spans < 2^32).
   * @throws Error when @p lo > @p hi.
   */
  int uniform_int(int lo, int hi);
  /// Standard normal N(0, 1) by Box–Muller, one output per two uniforms (the sine half is dropped
  /// so that every draw consumes exactly two numbers).
  double normal();
  /// Exponential with rate @p rate (mean 1 / rate) by inverse CDF: -ln(1 - u) / rate.
  double exponential(double rate);

 private:
  std::uint64_t state_;
};

}  // namespace servelab
