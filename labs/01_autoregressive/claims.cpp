// SPDX-License-Identifier: MIT
/**
 * @file claims.cpp
 * @brief Lab 01's claims, each decided on this run's numbers, and the verdict (lab01.h).
 * @see labs/01_autoregressive/README.md
 */
#include <cmath>
#include <string>

#include "lab01.h"
#include "perf/work.h"

namespace servelab::lab01 {

using namespace servelab::lab;

void check_claims(Report& report, const Table& steps, const Model& model, int prompt_len, int max_new_tokens,
                  const std::vector<GenerateResult>& runs) {
  const std::vector<std::int32_t>& out = runs[0].output_ids;
  const int last_context = prompt_len + max_new_tokens - 1;
  bool whole_context = true;
  for (std::size_t r = 0; r < steps.rows.size(); ++r)
    whole_context = whole_context && steps.number(static_cast<long>(r), "processed [tok]") ==
                                         steps.number(static_cast<long>(r), "context [tok]");
  report.claim({.id = "01.recomputes_prefix",
                .source = "the KV cache article, §2-1",
                .statement = "without a cache every step feeds the whole sequence so far",
                .held = whole_context,
                .evidence = "step 1 fed " + std::to_string(prompt_len) + " tokens, step " +
                            std::to_string(max_new_tokens) + " fed " +
                            plain_number(steps.number(-1, "processed [tok]")) + " of " + std::to_string(last_context),
                .cause = whole_context ? "" : "a step fed fewer tokens than its context: the cache was on"});
  const StepDtypes dtypes{model.options().weight_dtype, DType::F32, DType::F32};
  const auto step_flops = [&](int context) { return step_work(model.config(), dtypes, {{0, context}}, 1).flops; };
  const double work_growth = step_flops(last_context) / step_flops(prompt_len);
  report.claim({.id = "01.work_grows",
                .source = "the KV cache article, §2-1",
                .statement = "without a cache each step's work grows with the sequence",
                .held = work_growth > 1,
                .evidence = fixed(step_flops(prompt_len) / 1e9, 3) + " GFLOP at " + std::to_string(prompt_len) +
                            " tokens, " + fixed(step_flops(last_context) / 1e9, 3) + " at " +
                            std::to_string(last_context) + " (" + fixed(work_growth, 2) + "x, perf/work.h)",
                .cause = work_growth > 1 ? "" : "one token was generated: there is no second step"});
  std::vector<double> step_ms;
  for (std::size_t r = 0; r < steps.rows.size(); ++r)
    step_ms.push_back(steps.number(static_cast<long>(r), "time [ms]"));
  const StepGrowth growth = step_growth(step_ms);
  const bool time_grows = growth.ratio() > 1;
  report.claim({.id = "01.time_grows",
                .source = "the KV cache article, §2-1",
                .statement = "without a cache each step's time grows with the sequence",
                .held = time_grows,
                .evidence = "median step " + fixed(growth.first, 2) + " ms over the first third, " +
                            fixed(growth.last, 2) + " ms over the last (" + fixed(growth.ratio(), 2) +
                            "x; the work grows " + fixed(work_growth, 2) + "x)",
                .cause = time_grows ? ""
                                    : "neighbouring steps, one token apart, differ in time by a median " +
                                          fixed(100 * growth.noise, 0) + "%: this run's timing noise hides the " +
                                          fixed(100 * (work_growth - 1), 0) +
                                          "% growth of the work (rerun on a quiet machine)"});
  const RequestMetrics metrics = runs[0].metrics();
  double itl_sum = 0;
  for (double gap : metrics.itl) itl_sum += gap;
  const double mean_itl = itl_sum / static_cast<double>(metrics.itl.size());
  const bool definitions = std::abs(metrics.ttft - runs[0].step_seconds[0]) <= 1e-9 * metrics.ttft &&
                           std::abs(metrics.tpot - mean_itl) <= 1e-9 * mean_itl;
  report.claim({.id = "01.ttft_tpot",
                .source = "the TTFT/TPOT article (TTFT, TPOT); vLLM's definitions",
                .statement = "TTFT is the prefill step and TPOT the mean gap between the later tokens",
                .held = definitions,
                .evidence = "TTFT " + fixed(1e3 * metrics.ttft, 2) + " ms = step 1; TPOT " +
                            fixed(1e3 * metrics.tpot, 2) + " ms = mean ITL " + fixed(1e3 * mean_itl, 2) + " ms",
                .cause = definitions ? "" : "the metrics do not follow their definitions (engine/serve/metrics.h)"});
  report.claim({.id = "01.same_tokens",
                .source = "this lab",
                .statement = "recomputing gives the tokens of the KV cache path",
                .held = true,  // the lab stopped above had they differed
                .evidence = std::to_string(out.size()) + " tokens, hash " + token_hash(out) + " on both paths"});
  report.verdict("without a cache every step feeds the whole sequence, and the step time grows " +
                 fixed(growth.ratio(), 1) + "x from the first third of the steps to the last (" +
                 std::to_string(prompt_len) + " to " + std::to_string(last_context) +
                 " tokens). Tokens equal the reference path (hash " + token_hash(out) + ").");
}

}  // namespace servelab::lab01
