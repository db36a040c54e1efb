// SPDX-License-Identifier: MIT
/**
 * @file sampler.h
 * @brief Picks the next token from logits: greedy, or seeded sampling with
 *        temperature, top-k and top-p (the knobs of Hugging Face's generate()
 *        and vLLM's SamplingParams).
 */
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace servelab {

/// How to choose the next token.
struct SamplingParams {
  float temperature = 0.0f;  ///< 0 = greedy (argmax); otherwise logits are divided by it
  int top_k = 0;             ///< keep the k most likely tokens; 0 = all
  float top_p = 1.0f;        ///< keep the smallest set whose probability reaches p; 1 = all
  std::uint64_t seed = 0;    ///< random stream of this request

  /**
   * @brief Checks the ranges, naming the command-line flag that is wrong.
   * @throws Error for temperature < 0, top_k < 0 or top_p outside (0, 1].
   */
  void validate() const;
};

/**
 * @brief A per-request sampler: the same draws for a given seed on every run.
 *
 * The weights of ids more than 9·T below the best logit only add to the
 * softmax's sum; they are floats from a vector exponential (within 4·10⁻⁷ of
 * e^x, kernels/cpu/softmax_exp.h) summed in vector lanes, so a machine with
 * another instruction set can differ in a probability's last bits: a draw
 * differs there only when u falls within about 10⁻⁶ of a boundary.
 */
class Sampler {
 public:
  /// Validates @p params and seeds the stream.
  explicit Sampler(const SamplingParams& params);

  /**
   * @brief Chooses a token.
   *
   * Greedy (temperature 0): argmax(@p logits), drawing no random number.
   * Otherwise exactly one uniform() draw u in [0, 1) per call:
   * 1. order the ids by logit, highest first, the lower id first among equal
   *    logits; with top_k > 0 keep only the first top_k of them;
   * 2. p_i = exp((l_i - l_max) / temperature) / sum over the kept ids (subtract
   *    the largest logit before dividing, so a tiny temperature gives 1 for the
   *    best id and 0 for the rest instead of inf - inf = NaN);
   * 3. with top_p < 1 keep the shortest prefix of that order whose mass reaches
   *    top_p (at least one id) and divide its p_i by that mass;
   * 4. return the first id, in that order, whose cumulative p exceeds u (u < cdf);
   *    the last kept id if rounding leaves u above the total.
   * @param logits [vocab] scores of the next token.
   * @return the token id; ties in greedy mode go to the lowest id.
   */
  std::int32_t sample(std::span<const float> logits);

  /**
   * @brief Moves the stream past @p num_samples tokens sampled elsewhere with the same
   *        params (a prefill worker sampled the first token), so the next sample() draws
   *        what a sampler that had made those calls would draw. Greedy draws nothing.
   */
  void skip(int num_samples);
  /// True when sample() is argmax(): the caller may then ask the model for the argmax alone (Model::forward_greedy()).
  bool greedy() const { return params_.temperature == 0.0f; }

 private:
  double uniform();  // [0, 1) from 53 random bits, the same on every standard library

  SamplingParams params_;
  // std::mt19937_64, not the project's SplitMix64 (core/random.h): its output is fixed by the
  // C++ standard, and every sampled token of a seeded request comes from it, so another
  // generator would change them all. uniform() takes its 53 bits itself (no std distribution).
  std::mt19937_64 rng_;
  // sample()'s scratch, [vocab] each, kept between calls so that a token allocates nothing.
  std::vector<std::int32_t> ids_;
  std::vector<float> cold_weights_;
};

/**
 * @brief Index of the largest value, lowest index on ties (the CUDA argmax's rule, kernels/math/argmax.h).
 *
 * Scan left to right, keeping the best candidate so far with argmax_pick()
 * (kernels/math/argmax.h), starting from {0, kNoArgmax}: it already prefers
 * a number to a NaN and the lower index on a tie.
 * @return a NaN never wins over a number; a row of NaNs, or an empty one, gives 0.
 */
std::int32_t argmax(std::span<const float> values);

}  // namespace servelab
