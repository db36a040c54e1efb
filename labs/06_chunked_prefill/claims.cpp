// SPDX-License-Identifier: MIT
/**
 * @file claims.cpp
 * @brief Lab 06's claims, each decided on this run's numbers, and the one-line verdict.
 * @see labs/06_chunked_prefill/README.md
 */
#include <algorithm>
#include <iomanip>
#include <sstream>

#include "lab06.h"

namespace servelab::lab06 {
namespace {

std::string ms(double seconds, int digits = 1) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << 1e3 * seconds << " ms";
  return os.str();
}

std::string num(double value, int digits = 2) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << value;
  return os.str();
}

const char* const kv_article = "the KV cache article (\"3-2편. Prefill, Decode, KV Cache\"), §5-3 Chunked Prefill";
const char* const pd_article = "the prefill/decode article, section \"Chunked Prefill\"";

// The rows of @p t for the chunked budgets of @p sweep within [lo, hi]: their values in @p column.
std::vector<double> budget_values(const Table& t, const std::vector<int>& sweep, int lo, int hi,
                                  const std::string& column) {
  std::vector<double> out;
  for (int b : sweep)
    if (b >= lo && b <= hi)
      out.push_back(t.number(t.row_where("configuration", budget_name(true, b) + " (simulated)"), column));
  return out;
}

double lowest(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::ranges::min_element(v); }
double highest(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::ranges::max_element(v); }

}  // namespace

// The chapter's claims, each decided on this run's numbers, then the one-line verdict.
void check_claims(Report& report, const Flags& f, const GpuScale& g, const ArticleSplit& split, const HeadOfLine& head,
                  const BudgetSweep& sweep, const Table& gpu_table, const Capacity& cap, const NotEnough& limits) {
  const Table& hol = head.table;
  std::string chunks;
  for (int n : split.chunks) chunks += (chunks.empty() ? "" : " + ") + std::to_string(n);
  report.claim({.id = "06.split",
                .source = kv_article,
                .statement = "a 1,000-token prompt with a budget of 512 and 256-token chunks is prefilled as "
                             "256 + 256 + 256 + 232 beside the running decodes",
                .held = split.chunks == std::vector<int>{256, 256, 256, 232},
                .evidence = "this engine's scheduler: " + chunks + " beside 4 decodes",
                .cause = "the scheduler gave the chunks " + chunks});
  report.claim({.id = "06.kv_equal",
                .source = kv_article,
                .statement = "after the last chunk the KV cache holds what a one-shot prefill leaves",
                .held = head.kv_equal && head.kv_bytes > 0,
                .evidence = "the head-of-line runs on this machine's model: " + std::to_string(head.kv_bytes) +
                            " bytes of the long prompts' K/V per configuration, compared byte for byte",
                .cause = head.kv_bytes == 0
                             ? "the " + std::to_string(f.long_prompt) + "-token prompt fills no whole block of " +
                                   std::to_string(f.block_size) + " tokens, so no bytes were compared"
                             : std::string("a chunked run's K/V bytes differ from no chunking's")});

  const double stall_without = hol.number(0, "longest stall [ms]"), stall_with = hol.number(-1, "longest stall [ms]");
  const double itl_without = hol.number(0, "ITL p99 [ms]"), itl_with = hol.number(-1, "ITL p99 [ms]");
  const double tpot_without = hol.number(0, "TPOT p99 [ms]");
  const std::string with_name = std::get<std::string>(hol.cell(-1, "configuration"));
  report.claim({.id = "06.stall_here",
                .source = pd_article,
                .statement = "chunked prefill lowers the decoders' token-gap p99 (the article's TPOT p99) when long "
                             "prompts join them, with the same tokens",
                .held = itl_with < itl_without,
                .evidence = "this machine, " + std::to_string(f.long_prompt) + "-token prompts: ITL p99 " +
                            num(itl_without) + " ms without chunks, " + num(itl_with) + " ms " + with_name +
                            "; longest stall " + num(stall_without, 1) + " -> " + num(stall_with, 1) + " ms",
                .cause = "the chunked run's longest stall (" + num(stall_with, 1) +
                         " ms) is no shorter than one whole prefill (" + num(stall_without, 1) +
                         " ms): the budget does not split the " + std::to_string(f.long_prompt) + "-token prompt"});
  report.claim(
      {.id = "06.tpot_dilutes",
       .source = "this lab (vLLM's metric definitions, docs/concepts/metrics.md)",
       .statement = "vLLM's TPOT p99, a per-request mean, hides the stall that the token-gap (ITL) p99 shows",
       .held = tpot_without < itl_without,
       .evidence = "without chunks: TPOT p99 " + num(tpot_without) + " ms, ITL p99 " + num(itl_without) + " ms",
       .cause = "stalls came so often that a decoder's mean gap reached the p99 gap"});

  const Table& t = gpu_table;
  const double sim_itl_plain = t.number(0, "ITL p99 [ms]"), sim_itl_small = t.number(1, "ITL p99 [ms]");
  report.claim({.id = "06.spike_sim",
                .source = pd_article,
                .statement = "without chunking the token-gap p99 jumps from tens to hundreds of ms; chunked it stays "
                             "at tens",
                .held = sim_itl_plain >= 100 && sim_itl_small < 100,
                .evidence = g.what() + ": ITL p99 " + num(sim_itl_plain) + " ms without chunks, " + num(sim_itl_small) +
                            " ms at budget " + std::to_string(f.gpu_sweep.front()),
                .cause = "one 2,048-token prompt (the article's example) prefills in " +
                         ms(lone_prefill(g, 2048, false, 16384)) +
                         " alone on this GPU and model, so a stall is tens "
                         "of ms; hundreds need several long prompts in one step, which this workload (" +
                         f.gpu_prompt_dist + " at " + plain_number(f.gpu_rate) + " req/s) seldom brings"});

  const auto small_itl = budget_values(t, f.gpu_sweep, 512, 2048, "ITL p99 [ms]"),
             large_itl = budget_values(t, f.gpu_sweep, 4096, 8192, "ITL p99 [ms]"),
             small_ttft = budget_values(t, f.gpu_sweep, 512, 2048, "TTFT p99 [ms]"),
             large_ttft = budget_values(t, f.gpu_sweep, 4096, 8192, "TTFT p99 [ms]");
  const bool both = !small_itl.empty() && !large_itl.empty();
  const bool steadier = both && highest(small_itl) < lowest(large_itl),
             faster = both && lowest(large_ttft) < lowest(small_ttft);
  report.claim({.id = "06.budget_direction_sim",
                .source = pd_article + std::string(", the budget guide"),
                .statement = "budgets of 512-2,048 keep the token-gap p99 steady; 4,096-8,192 improve TTFT",
                .held = steadier && faster,
                .evidence = g.what() + ": ITL p99 " + num(lowest(small_itl)) + "-" + num(highest(small_itl)) +
                            " ms at 512-2,048 vs " + num(lowest(large_itl)) + "-" + num(highest(large_itl)) +
                            " ms at 4,096-8,192; best TTFT p99 " + num(lowest(small_ttft), 1) + " vs " +
                            num(lowest(large_ttft), 1) + " ms",
                .cause = !both       ? std::string("--gpu-sweep has no budget in 512-2,048 or none in 4,096-8,192")
                         : !steadier ? "a 4,096-8,192 budget gave as low an ITL p99: few prompts of this workload "
                                       "are long enough for a large budget to matter"
                                     : "a 512-2,048 budget gave as good a TTFT p99: queueing, not the prefill's "
                                       "step count, sets TTFT at this rate"});

  // The real run: does a larger budget buy TTFT on this machine, and why not when it does not.
  const ServingMetrics &first = sweep.runs.front().m, &last = sweep.runs.back().m;
  const StepCostLine here = fit_step_cost(sweep.steps), there = simulated_step_cost(g, 512);
  const std::string line_here = "a step here costs " + num(1e3 * here.fixed) + " ms + " + num(1e6 * here.per_token, 1) +
                                " us/token (fixed part " + num(100 * here.fixed_share(512), 0) +
                                "% of a 512-token step), on " + g.what() + " " + num(1e3 * there.fixed) + " ms + " +
                                num(1e6 * there.per_token, 2) + " us/token (" + num(100 * there.fixed_share(512), 0) +
                                "%)";
  report.claim({.id = "06.budget_ttft_here",
                .source = pd_article + std::string(", the budget guide"),
                .statement = "on this machine the largest budget gives a TTFT p50 at least 10% below the smallest's",
                .held = last.ttft.median < 0.9 * first.ttft.median,
                .evidence = "TTFT p50 " + num(1e3 * first.ttft.median, 1) + " ms at budget " +
                            std::to_string(f.sweep.front()) + ", " + num(1e3 * last.ttft.median, 1) + " ms at " +
                            std::to_string(f.sweep.back()),
                .cause = "on this CPU a step's cost is nearly linear in its tokens, so a larger budget has little "
                         "fixed per-step cost to amortise: " +
                         line_here});

  report.claim({.id = "06.capacity_sim",
                .source = "Sarathi-Serve (Agrawal et al., OSDI 2024): 2.6x on Mistral-7B / one A100, 3.7x on "
                          "Yi-34B / two A100s",
                .statement = "chunked prefill raises the capacity under a p99 TTFT and p99 TBT (token gap) SLO",
                .held = cap.best > cap.plain,
                .evidence = g.what() + ", SLO " + g.slo.describe() + ": " + num(cap.plain, 1) +
                            " req/s without chunks, " + num(cap.best, 1) + " req/s at budget " +
                            std::to_string(cap.best_budget) +
                            (cap.plain > 0 ? " (" + num(cap.best / cap.plain) + "x)" : std::string("")),
                .cause = "no chunked budget met the SLO at a higher rate than no chunking"});
  report.claim(
      {.id = "06.not_enough_sim",
       .source = pd_article,
       .statement = "with a tens-of-ms SLO on both TTFT and the token gap chunked prefill meets it at no "
                    "rate, and prompts past 8K tokens cut the capacity it reaches",
       .held =
           limits.strict_best == 0 &&
                   limits.long_prompt_best<
                       cap.best,
                       .evidence = g.what() + ", budget " + std::to_string(cap.best_budget) + ": " + num(cap.best, 1) +
                                   " req/s on the workload above, " + num(limits.strict_best, 1) +
                                   " with TTFT <= " + plain_number(f.strict_slo_ttft_ms) + " ms, " +
                                   num(limits.long_prompt_best, 1) + " with " + std::to_string(f.long_context_prompt) +
                                   "-token prompts, one of which alone takes " + ms(limits.lone_prefill_s) +
                                   " to its first token",
                       .cause = limits.strict_best> 0
               ? "this workload's prompts are short enough to prefill within " + plain_number(f.strict_slo_ttft_ms) +
                     " ms at " + num(limits.strict_best, 1) + " req/s"
               : std::string("the long prompts' capacity is no lower than the workload's")});

  int held = 0;
  for (const Claim& c : report.claims()) held += c.held;
  std::ostringstream v;
  v << held << " of " << report.claims().size() << " claims held; on this machine chunking cut the decoders' "
    << "token-gap p99 " << num(itl_without, 1) << " -> " << num(itl_with, 1) << " ms with the same tokens, and on "
    << g.what() << " it moved capacity under the p99 TTFT/TBT SLO " << num(cap.plain, 1) << " -> " << num(cap.best, 1)
    << " req/s.";
  report.verdict(v.str());
}

}  // namespace servelab::lab06
