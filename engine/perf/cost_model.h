// SPDX-License-Identifier: MIT
/**
 * @file cost_model.h
 * @brief Predicts how long a model step takes on some hardware from the
 *        step's FLOPs and bytes:
 *        max(FLOPs / (peak·e_c), bytes / (bandwidth·e_m)) + a fixed per-step overhead,
 *        where e_c and e_m are the fractions of each roof that real kernels reach.
 *
 * Calibrated on this machine against measured steps (lab 03), the same
 * model given a GPU's datasheet roofs predicts that GPU's step times. Those
 * predictions are simulated, never measured, and everything that prints
 * them says so. Labs 06 and 07 drive their schedulers with it to run
 * GPU-scale serving on a laptop.
 * @see labs/03_roofline/README.md
 */
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/model_config.h"
#include "perf/counter.h"
#include "perf/hardware.h"
#include "perf/work.h"

namespace servelab {

/// Roofline time of a step plus a per-step overhead.
struct CostModel {
  std::string label;              ///< what it models, e.g. "this CPU (measured)" or "H100 SXM (simulated)"
  double peak_flops = 0;          ///< FLOP/s
  double bandwidth = 0;           ///< bytes/s
  double overhead_s = 0;          ///< fixed cost per step: launches, synchronisation, Python (seconds)
  bool simulated = false;         ///< true when the roofs come from a datasheet rather than this machine
  double compute_efficiency = 1;  ///< fraction of peak_flops that compute-bound steps reach
  double memory_efficiency = 1;   ///< fraction of bandwidth that memory-bound steps reach

  /**
   * @brief Predicted seconds for a step doing @p work: the roofline time of the
   *        slower roof, max(work.flops / (peak_flops · compute_efficiency),
   *        work.bytes() / (bandwidth · memory_efficiency)), plus overhead_s.
   *        Every byte of the work counts (weights, activations, KV read and written).
   */
  double predict(const Work& work) const;

  /**
   * @brief A model from a datasheet entry: matrix (tensor-core) peak and memory bandwidth; simulated.
   * @param overhead_s per-step overhead to add (0 for the pure roofline).
   */
  static CostModel for_hardware(const Hardware& hw, double overhead_s);

  /**
   * @brief Fits the two efficiencies and the overhead to measured steps, given measured roofs.
   *
   * Each point is t ≈ FLOPs/(peak·e_c) + overhead when compute-bound and
   * bytes/(bandwidth·e_m) + overhead when memory-bound: a weighted linear
   * least-squares fit (weights 1/t², so relative errors count) with the
   * efficiencies kept <= 1 and the overhead >= 0. Which roof bounds a point is
   * first judged by the measured roofs' ridge, then by the fitted model,
   * until the split stops changing.
   * @param points (work, measured seconds) pairs; must not be empty.
   */
  static CostModel calibrate(std::string label, double peak_flops, double bandwidth,
                             const std::vector<std::pair<Work, double>>& points);
};

/**
 * @brief Predicted seconds to generate @p new_tokens after a @p prompt_len
 *        prompt for one sequence, with or without a KV cache: the sum of
 *        predicted step times (without a cache every step is a prefill of
 *        the whole sequence).
 */
double predict_generation(const CostModel& model, const ModelConfig& config, const StepDtypes& dtypes, int prompt_len,
                          int new_tokens, bool kv_cache);

}  // namespace servelab
