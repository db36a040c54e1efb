// SPDX-License-Identifier: MIT
/**
 * @file time.cpp
 * @brief Lab 02's time tables: the article's use_cache off/on experiment
 *        (refused unless both paths give the same tokens), the work per step
 *        the cache removes, and every step's time for the plot (lab02.h).
 * @see labs/02_kv_cache/README.md
 */
#include <algorithm>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "core/error.h"
#include "lab02.h"
#include "perf/work.h"

namespace servelab::lab02 {

using namespace servelab::lab;

std::vector<double> median_steps(const std::vector<GenerateResult>& runs) {
  std::vector<double> out;
  for (std::size_t s = 0; s < runs[0].step_seconds.size(); ++s) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.step_seconds[s]);
    out.push_back(summarize(v).median);
  }
  return out;
}

SpeedRuns speed_table(Model& model, const LabOptions& o, const LabConfig& no_cache, const LabConfig& kv_cache,
                      const std::vector<int>& token_counts, const std::vector<std::int32_t>& prompt,
                      bool fast_reductions) {
  Table speed{
      .name = "kv_cache_speedup",
      .title = "Generation time, use_cache off vs on (the article's table)",
      .columns = {"generated tokens", Column{"no cache [s]", 3}, Column{"KV cache [s]", 3}, Column{"speedup", 2},
                  Column{"no cache [tok/s]", 1}, Column{"KV cache [tok/s]", 1}, "no cache min/max [s]",
                  "KV cache min/max [s]", "same tokens", Column{"article: no cache [s]", 2},
                  Column{"article: KV cache [s]", 2}, Column{"article: speedup", 2}}};
  // The KV cache article's own table (qwen2.5-1.5b on a GPU, fp16), printed beside ours row by row.
  const std::map<int, std::pair<double, double>> article = {{20, {1.938, 1.433}},
                                                            {50, {2.202, 2.228}},
                                                            {100, {4.528, 4.110}},
                                                            {200, {9.226, 8.249}},
                                                            {400, {24.924, 16.141}}};
  SpeedRuns out;
  long total_steps = 0;
  for (int n : token_counts) total_steps += 2L * n * (o.repeats + o.warmup);
  std::optional<Progress> bar(std::in_place, "generating", total_steps);  // cleared before the tables print
  for (int n : token_counts) {
    std::vector<GenerateResult> off, on;
    for (int i = 0; i < o.warmup + o.repeats; ++i) {
      // Alternate the two paths so a slow phase of the machine hits both.
      for (bool cache : {false, true}) {
        const LabConfig& config = cache ? kv_cache : no_cache;
        use_config(model, config);
        GenerateOptions gen;
        gen.max_new_tokens = n;
        gen.use_kv_cache = config.engine.enable_kv_cache;
        GenerateResult r = generate(model, prompt, gen, [&](std::int32_t) { bar->advance(); });
        if (i >= o.warmup) (cache ? on : off).push_back(std::move(r));
      }
    }
    // The speedup means nothing unless both paths produced the same tokens.
    for (std::size_t i = 0; i < off.size(); ++i) {
      const auto& a = off[i].output_ids;
      const auto& b = on[i].output_ids;
      if (a != b) {
        const auto at = std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin();
        fail("lab 02: with and without the KV cache the tokens differ first at new token ", at, " (", a[at], " vs ",
             b[at], "); no speedup is printed for different outputs");
      }
    }
    auto seconds = [](const std::vector<GenerateResult>& runs) {
      std::vector<double> s;
      for (const auto& r : runs) s.push_back(r.e2e());
      return summarize(s);
    };
    const Summary t_off = seconds(off), t_on = seconds(on);
    auto min_max = [](const Summary& s) {
      std::ostringstream os;
      os << std::fixed << std::setprecision(3) << s.min << "/" << s.max;
      return os.str();
    };
    std::vector<Cell> row = {static_cast<long long>(n), t_off.median,    t_on.median,    t_off.median / t_on.median,
                             n / t_off.median,          n / t_on.median, min_max(t_off), min_max(t_on),
                             std::string("yes")};
    if (const auto a = article.find(n); a != article.end())
      row.insert(row.end(), {a->second.first, a->second.second, a->second.first / a->second.second});
    else
      row.insert(row.end(), 3, std::string("-"));
    speed.add_row(row);
    out.hash = token_hash(on[0].output_ids);
    out.longest_off = std::move(off);
    out.longest_on = std::move(on);
  }
  bar.reset();
  speed.note = std::string(
                   "Times include prefill. The article's columns are the KV cache article's measurements "
                   "(qwen2.5-1.5b, fp16, a GPU), not this machine's. ") +
               (fast_reductions ? "Both paths used OpenBLAS reductions; their tokens were checked equal"
                                : "Both paths use deterministic reductions, so equal tokens are guaranteed by "
                                  "construction and checked here") +
               " (last run's hash " + out.hash + ").";
  out.table = std::move(speed);
  return out;
}

Table work_table(const ModelConfig& c, int prompt_len, int n, const std::vector<double>& steps_off,
                 const std::vector<double>& steps_on) {
  Table work{.name = "work_per_step",
             .title = "Work per step for " + std::to_string(n) + " new tokens (GFLOP, all layers)",
             .columns = {"step", "context L", Column{"KV proj, no cache", 4}, Column{"KV proj, cache", 4},
                         Column{"attention, no cache", 4}, Column{"attention, cache", 4}, Column{"no cache [ms]", 2},
                         Column{"cache [ms]", 2}}};
  double totals[6] = {0, 0, 0, 0, 0, 0};
  std::vector<int> shown = {1, 2, n / 4, n / 2, 3 * n / 4, n};
  for (int s = 1; s <= n; ++s) {
    const int context = prompt_len + s - 1;  // tokens in the sequence when step s starts
    const int computed = s == 1 ? 0 : context - 1;
    const double row[6] = {kv_projection_flops(c, context) / 1e9,
                           kv_projection_flops(c, context - computed) / 1e9,
                           attention_flops(c, 0, context) / 1e9,
                           attention_flops(c, computed, context - computed) / 1e9,
                           steps_off[s - 1] * 1e3,
                           steps_on[s - 1] * 1e3};
    for (int k = 0; k < 6; ++k) totals[k] += row[k];
    if (std::find(shown.begin(), shown.end(), s) != shown.end() && (work.rows.empty() || work.number(-1, "step") != s))
      work.add_row(
          {static_cast<long long>(s), static_cast<long long>(context), row[0], row[1], row[2], row[3], row[4], row[5]});
  }
  work.add_row(
      {std::string("total"), std::string(""), totals[0], totals[1], totals[2], totals[3], totals[4], totals[5]});
  work.note =
      "Without a cache step s re-projects all L tokens (O(L·D)) and attends L queries to L keys "
      "(O(L²·D)); with it, one token is projected and one query attends (O(L·D)). Step 1 is the prefill.";
  return work;
}

Table step_times_table(int n, const std::vector<double>& steps_off, const std::vector<double>& steps_on) {
  Table per_step{.name = "step_times",
                 .title = "Per-step time for " + std::to_string(n) + " new tokens",
                 .columns = {"step", Column{"no cache [ms]", 3}, Column{"cache [ms]", 3}}};
  for (int s = 1; s <= n; ++s)
    per_step.add_row({static_cast<long long>(s), steps_off[s - 1] * 1e3, steps_on[s - 1] * 1e3});
  return per_step;
}

}  // namespace servelab::lab02
