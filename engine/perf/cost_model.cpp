// SPDX-License-Identifier: MIT
#include "perf/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"
#include "core/stats.h"

namespace servelab {

double CostModel::predict(const Work& work) const {
  // BEGIN LAB03 SOLUTION: CostModel::predict, the slower roof plus the per-step overhead
  return std::max(work.flops / (peak_flops * compute_efficiency), work.bytes() / (bandwidth * memory_efficiency)) +
         overhead_s;
  // END LAB03 SOLUTION
}

CostModel CostModel::for_hardware(const Hardware& hw, double overhead_s) {
  return {hw.name + " (simulated)", hw.matrix_tflops * 1e12, hw.bandwidth_gbs * 1e9, overhead_s, true, 1.0, 1.0};
}

namespace {

// Solves the weighted least-squares problem min Σ w_i (t_i − a·F_i − b·B_i − c)²
// over the unknowns that are free; fixed ones keep the value passed in.
// Rows are (F_i, B_i, t_i) where a point's unused term is already zeroed.
struct Fit {
  double a, b, c;
};
Fit least_squares(const std::vector<std::array<double, 4>>& rows, Fit start, bool free_a, bool free_b, bool free_c) {
  // Normal equations over the free unknowns, built as a dense 3x3 system.
  double M[3][3] = {}, v[3] = {};
  const bool free_[3] = {free_a, free_b, free_c};
  for (const auto& [F, B, t, w] : rows) {
    const double x[3] = {F, B, 1.0};
    double rhs = t;
    for (int j = 0; j < 3; ++j)
      if (!free_[j]) rhs -= x[j] * (j == 0 ? start.a : j == 1 ? start.b : start.c);
    for (int i = 0; i < 3; ++i) {
      if (!free_[i]) continue;
      v[i] += w * x[i] * rhs;
      for (int j = 0; j < 3; ++j)
        if (free_[j]) M[i][j] += w * x[i] * x[j];
    }
  }
  for (int i = 0; i < 3; ++i)
    if (!free_[i]) M[i][i] = 1.0, v[i] = (i == 0 ? start.a : i == 1 ? start.b : start.c);
  // Gaussian elimination with partial pivoting on the 3x3 system.
  int order[3] = {0, 1, 2};
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 3; ++r)
      if (std::abs(M[r][col]) > std::abs(M[pivot][col])) pivot = r;
    std::swap(M[col], M[pivot]);
    std::swap(v[col], v[pivot]);
    std::swap(order[col], order[pivot]);
    if (std::abs(M[col][col]) < 1e-300) return start;  // degenerate: keep the start
    for (int r = col + 1; r < 3; ++r) {
      const double f = M[r][col] / M[col][col];
      for (int k = col; k < 3; ++k) M[r][k] -= f * M[col][k];
      v[r] -= f * v[col];
    }
  }
  double x[3];
  for (int r = 2; r >= 0; --r) {
    double sum = v[r];
    for (int k = r + 1; k < 3; ++k) sum -= M[r][k] * x[k];
    x[r] = sum / M[r][r];
  }
  return {x[0], x[1], x[2]};
}

}  // namespace

CostModel CostModel::calibrate(std::string label, double peak_flops, double bandwidth,
                               const std::vector<std::pair<Work, double>>& points) {
  check(!points.empty(), "cost model: no measured points to calibrate on");
  // Unknowns: a = 1/(peak·e_c), b = 1/(bandwidth·e_m), c = overhead. Each point is
  // t ≈ a·FLOPs + c if compute-bound, b·bytes + c if memory-bound; which roof bounds
  // it is first judged by the measured roofs, then by the fit, until it settles.
  Fit fit{1.0 / peak_flops, 1.0 / bandwidth, 0.0};
  std::vector<bool> compute(points.size());
  for (std::size_t i = 0; i < points.size(); ++i)
    compute[i] = bound_of(points[i].first.intensity(), peak_flops / bandwidth) == Bound::Compute;
  for (int round = 0; round < 10; ++round) {
    std::vector<std::array<double, 4>> rows;  // (FLOPs or 0, bytes or 0, seconds, weight)
    bool any_compute = false, any_memory = false;
    for (std::size_t i = 0; i < points.size(); ++i) {
      const auto& [work, seconds] = points[i];
      // Weight 1/t²: relative errors count, so millisecond decode steps matter as much as second-long prefills.
      rows.push_back(
          {compute[i] ? work.flops : 0.0, compute[i] ? 0.0 : work.bytes(), seconds, 1.0 / (seconds * seconds)});
      (compute[i] ? any_compute : any_memory) = true;
    }
    Fit next = least_squares(rows, fit, any_compute, any_memory, true);
    // A roof cannot be beaten (efficiency <= 1) and overhead is not negative: clamp and refit the rest.
    const bool clamp_a = next.a < 1.0 / peak_flops, clamp_b = next.b < 1.0 / bandwidth, clamp_c = next.c < 0;
    if (clamp_a) next.a = 1.0 / peak_flops;
    if (clamp_b) next.b = 1.0 / bandwidth;
    if (clamp_c) next.c = 0.0;
    if (clamp_a || clamp_b || clamp_c)
      next = least_squares(rows, next, any_compute && !clamp_a, any_memory && !clamp_b, !clamp_c);
    fit = {std::max(next.a, 1.0 / peak_flops), std::max(next.b, 1.0 / bandwidth), std::max(next.c, 0.0)};
    bool changed = false;
    for (std::size_t i = 0; i < points.size(); ++i) {
      const bool c = fit.a * points[i].first.flops >= fit.b * points[i].first.bytes();
      changed |= c != compute[i];
      compute[i] = c;
    }
    if (!changed) break;
  }
  return {std::move(label), peak_flops, bandwidth, fit.c, false, 1.0 / (fit.a * peak_flops), 1.0 / (fit.b * bandwidth)};
}

double predict_generation(const CostModel& model, const ModelConfig& config, const StepDtypes& dtypes, int prompt_len,
                          int new_tokens, bool kv_cache) {
  double seconds = 0;
  for (int step = 0; step < new_tokens; ++step) {
    const std::int64_t context = prompt_len + step;  // tokens in the sequence when the step starts
    const SeqShape shape = kv_cache && step > 0 ? SeqShape{context - 1, 1} : SeqShape{0, context};
    seconds += model.predict(step_work(config, dtypes, {shape}, 1));
  }
  return seconds;
}

}  // namespace servelab
