// SPDX-License-Identifier: MIT
/**
 * @file length_dist.h
 * @brief How long a workload's prompts and outputs are: fixed, uniform or
 *        lognormal token counts (ShareGPT-like by default), read from their
 *        flag spelling.
 * @verbatim
 *  --prompt-len-dist lognormal:98:1:4:1024
 *      length = round(98 * e^(1 * Z)), Z ~ N(0, 1), clamped to [4, 1024]
 *      mean before the clamp 98 * e^(1/2) = 162 tokens, about 157 after it
 * @endverbatim
 * @see labs/04_paged_attention/README.md
 */
#pragma once

#include <string>
#include <string_view>

#include "core/random.h"
#include "workload/limits.h"

namespace servelab {

/**
 * @brief A distribution of token counts (prompt or output lengths).
 *
 * Flag spellings, all lengths in tokens:
 * - `fixed:N`: always N.
 * - `uniform:LO:HI`: every integer in [LO, HI] equally likely.
 * - `lognormal:MEDIAN:SIGMA[:MIN:MAX]`: round(MEDIAN * e^(SIGMA * Z)), Z ~ N(0, 1),
 *   then clamped (not redrawn) to [MIN, MAX] (default [1, kMaxWorkloadTokens]).
 *   Its mean before clamping is \f$\mathrm{MEDIAN}\cdot e^{\sigma^2/2}\f$.
 * - `sharegpt`: the lognormal preset of sharegpt_prompt_lengths() or
 *   sharegpt_output_lengths(), by which length is being parsed.
 */
struct LengthDist {
  /// Which family.
  enum class Kind { fixed, uniform, lognormal };
  Kind kind = Kind::fixed;  ///< the family
  int min = 1;              ///< fixed: the value; uniform: LO; lognormal: clamp floor (tokens, >= 1)
  int max = 1;              ///< fixed: the value; uniform: HI; lognormal: clamp ceiling (tokens)
  double median = 0;        ///< lognormal only: e^mu, tokens (> 0)
  double sigma = 0;         ///< lognormal only: standard deviation of ln(length) (>= 0)

  /// `fixed:N` (checked: 1 <= N <= kMaxWorkloadTokens).
  static LengthDist fixed(int n);
  /// `uniform:LO:HI` (checked: 1 <= LO <= HI <= kMaxWorkloadTokens).
  static LengthDist uniform(int lo, int hi);
  /// `lognormal:MEDIAN:SIGMA:MIN:MAX` (checked: MEDIAN > 0, SIGMA >= 0, 1 <= MIN <= MAX <= kMaxWorkloadTokens).
  static LengthDist lognormal(double median, double sigma, int min = 1, int max = kMaxWorkloadTokens);

  /// One draw, in [min, max]. Consumes a fixed number of numbers from @p rng (fixed none,
  /// uniform one, lognormal two), so a stream's later draws never depend on earlier values.
  int sample(SplitMix64& rng) const;
  /// The flag spelling, e.g. `lognormal:98:1:4:1024` (parse(describe()) gives the same distribution).
  std::string describe() const;
  /// What is wrong with the fields (a bound outside [1, kMaxWorkloadTokens], min > max, ...), or "" when nothing is.
  std::string problem() const;
};

/// Which length a flag describes; it picks the `sharegpt` preset.
enum class LengthRole { prompt, output };

/**
 * @brief ShareGPT-like prompt lengths: `lognormal:98:1:4:1024`.
 *
 * Where the numbers come from: Kwon et al., "Efficient Memory Management for
 * Large Language Model Serving with PagedAttention" (vLLM, SOSP 2023), §6.1
 * and Fig. 11, report a mean of 161 input and 338 output tokens on their
 * ShareGPT workload (8.4x and 5.8x Alpaca's). The paper shows histograms,
 * not a fitted law; the shape is our assumption: a lognormal with SIGMA = 1
 * (a long right tail: pasted code and documents), and MEDIAN = mean / e^(1/2)
 * so that the unclamped mean equals the published one (98 * 1.649 = 162).
 * MIN 4 and MAX 1024 follow the filter vLLM's benchmarks apply to ShareGPT
 * (benchmarks/benchmark_serving.py: pairs with a prompt or output under 4
 * tokens, a prompt over 1024, or both over 2048 together are dropped);
 * clamping each length to 1024 keeps every pair within 2048. The clamp pulls
 * the sampled mean down to about 157.
 */
LengthDist sharegpt_prompt_lengths();

/**
 * @brief ShareGPT-like output lengths: `lognormal:205:1:4:1024` (mean 338 before the
 *        clamp, about 301 after it). Sources and reasoning as sharegpt_prompt_lengths().
 */
LengthDist sharegpt_output_lengths();

/**
 * @brief Reads a length distribution from its flag spelling (see LengthDist).
 * @param text e.g. `fixed:128`, `uniform:16:512`, `lognormal:100:0.8:1:2048`, `sharegpt`.
 * @param role which preset `sharegpt` means.
 * @param flag the flag's name for error messages, e.g. `--prompt-len-dist`.
 * @throws Error naming @p flag, the text and the expected spelling when a number is
 *         malformed, out of range, or the kind is unknown.
 */
LengthDist parse_length_dist(std::string_view text, LengthRole role, std::string_view flag);

}  // namespace servelab
