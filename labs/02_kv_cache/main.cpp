// SPDX-License-Identifier: MIT
/**
 * @file main.cpp
 * @brief Lab 02 — the KV cache: lab 01's configuration with one switch
 *        flipped (Techniques::kv_cache).
 *
 * Reproduces the source article's use_cache off/on experiment (same prompt,
 * greedy, 20..400 new tokens), refuses to print a speedup unless both runs
 * produced the same tokens, counts the K/V-projection and attention work the
 * cache removes, and checks the KV memory formula against the bytes the
 * engine's cache really allocates (memory.cpp, lab02.h).
 * @see labs/02_kv_cache/README.md
 */
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "kv/kv_cache.h"
#include "lab.h"
#include "lab02.h"
#include "perf/hardware.h"
#include "perf/work.h"
#include "serve/generate.h"
#include "serve/ladder.h"

using namespace servelab;
using namespace servelab::lab;
using namespace servelab::lab02;

namespace {

// Median per-step seconds over runs that all generated the same number of tokens.
std::vector<double> median_steps(const std::vector<GenerateResult>& runs) {
  std::vector<double> out;
  for (std::size_t s = 0; s < runs[0].step_seconds.size(); ++s) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.step_seconds[s]);
    out.push_back(summarize(v).median);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lab 02: the KV cache, use_cache off vs on", "lab_02_kv_cache"};
  LabOptions o;
  add_common_options(app, o, "small");
  std::vector<int> token_counts = {20, 50, 100, 200, 400};
  int prompt_len = 29;  // the article's prompt is 29 tokens in Qwen2.5's tokenizer
  bool fast_reductions = false;
  auto* counts_opt = app.add_option("--tokens", token_counts, "generated-token counts to measure")
                         ->delimiter(',')
                         ->capture_default_str();
  app.add_option("--prompt-len", prompt_len, "stand-in prompt length for models without a tokenizer.json")
      ->capture_default_str();
  app.add_flag("--fast-reductions", fast_reductions,
               "OpenBLAS GEMMs instead of deterministic ones: tokens may then differ, and the lab says where");

  return run_lab(app, argc, argv, [&] {
    if (o.quick) {
      if (counts_opt->count() == 0) token_counts = {8, 16};
      quick_timing(app, o);
    }
    for (int n : token_counts) check(n >= 2, "--tokens: every count must be >= 2, got ", n);
    std::sort(token_counts.begin(), token_counts.end());
    check(token_counts.back() >= 3, "--tokens: the largest count must be >= 3 (two decode steps to compare), got ",
          token_counts.back());
    LabConfig base;
    base.model = model_options(o, /*deterministic=*/!fast_reductions);
    auto model = load_model(o, base.model);
    const ModelConfig& c = model->config();
    const LabPrompt lab_prompt = article_prompt(o, c, prompt_len);
    const auto& prompt = lab_prompt.ids;
    prompt_len = static_cast<int>(prompt.size());
    check(prompt_len + token_counts.back() <= c.max_position_embeddings, "--tokens ", token_counts.back(),
          " + --prompt-len ", prompt_len, " exceeds max_position_embeddings (", c.max_position_embeddings, ") of ",
          c.name);
    base.engine.max_model_len = prompt_len + token_counts.back();  // the one contiguous region a request fills
    // Lab 01's configuration and lab 02's: the same base, the KV cache switched on.
    const LabConfig no_cache = configure(Techniques::for_lab(1), base),
                    kv_cache = configure(Techniques::for_lab(2), base);

    Report report("02_kv_cache", o.out);
    describe_run(report, *model, o);
    report.setting("technique", "KV cache on (lab 01 + Techniques::kv_cache), compared with lab 01's recompute");
    report.setting("workload", lab_prompt.description + ", greedy");
    report.print_settings("Lab 02 — KV cache: use_cache off vs on");

    // 1. The article's experiment: time to generate N tokens, cache off vs on.
    Table speed{.name = "kv_cache_speedup",
                .title = "Generation time, use_cache off vs on (the article's table)",
                .columns = {{"generated tokens"},
                            {"no cache [s]", 3},
                            {"KV cache [s]", 3},
                            {"speedup", 2},
                            {"no cache [tok/s]", 1},
                            {"KV cache [tok/s]", 1},
                            {"no cache min/max [s]"},
                            {"KV cache min/max [s]"},
                            {"same tokens"},
                            {"article: no cache [s]", 2},
                            {"article: KV cache [s]", 2},
                            {"article: speedup", 2}}};
    // The KV cache article's own table (qwen2.5-1.5b on a GPU, fp16), printed beside ours row by row.
    const std::map<int, std::pair<double, double>> article = {{20, {1.938, 1.433}},
                                                              {50, {2.202, 2.228}},
                                                              {100, {4.528, 4.110}},
                                                              {200, {9.226, 8.249}},
                                                              {400, {24.924, 16.141}}};
    std::vector<GenerateResult> longest_off, longest_on;
    long total_steps = 0;
    for (int n : token_counts) total_steps += 2L * n * (o.repeats + o.warmup);
    std::optional<Progress> bar(std::in_place, "generating", total_steps);  // cleared before the tables print
    std::string hash;
    for (const auto& [run, lab, config] : {std::tuple{"no cache", 1, no_cache}, {"KV cache", 2, kv_cache}})
      record_configuration(report, run, lab, base, config);
    for (int n : token_counts) {
      std::vector<GenerateResult> off, on;
      for (int i = 0; i < o.warmup + o.repeats; ++i) {
        // Alternate the two paths so a slow phase of the machine hits both.
        for (bool cache : {false, true}) {
          const LabConfig& config = cache ? kv_cache : no_cache;
          use_config(*model, config);
          GenerateOptions gen;
          gen.max_new_tokens = n;
          gen.use_kv_cache = config.engine.enable_kv_cache;
          GenerateResult r = generate(*model, prompt, gen, [&](std::int32_t) { bar->advance(); });
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
      hash = token_hash(on[0].output_ids);
      longest_off = std::move(off);
      longest_on = std::move(on);
    }
    bar.reset();
    speed.note = std::string(
                     "Times include prefill. The article's columns are the KV cache article's measurements "
                     "(qwen2.5-1.5b, fp16, a GPU), not this machine's. ") +
                 (fast_reductions ? "Both paths used OpenBLAS reductions; their tokens were checked equal"
                                  : "Both paths use deterministic reductions, so equal tokens are guaranteed by "
                                    "construction and checked here") +
                 " (last run's hash " + hash + ").";
    report.add_table(speed);

    // 2. The work the cache removes, step by step, for the longest run.
    const int n = token_counts.back();
    const auto steps_off = median_steps(longest_off), steps_on = median_steps(longest_on);
    Table work{.name = "work_per_step",
               .title = "Work per step for " + std::to_string(n) + " new tokens (GFLOP, all layers)",
               .columns = {{"step"},
                           {"context L"},
                           {"KV proj, no cache", 4},
                           {"KV proj, cache", 4},
                           {"attention, no cache", 4},
                           {"attention, cache", 4},
                           {"no cache [ms]", 2},
                           {"cache [ms]", 2}}};
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
      if (std::find(shown.begin(), shown.end(), s) != shown.end() &&
          (work.rows.empty() || work.number(-1, "step") != s))
        work.add_row({static_cast<long long>(s), static_cast<long long>(context), row[0], row[1], row[2], row[3],
                      row[4], row[5]});
    }
    work.add_row(
        {std::string("total"), std::string(""), totals[0], totals[1], totals[2], totals[3], totals[4], totals[5]});
    work.note =
        "Without a cache step s re-projects all L tokens (O(L·D)) and attends L queries to L keys "
        "(O(L²·D)); with it, one token is projected and one query attends (O(L·D)). Step 1 is the prefill.";
    report.add_table(work);

    const Table memory = kv_memory_table(), gpu_memory = gpu_memory_table(gpu("A100 80GB SXM"));
    report.add_table(memory);
    int cases = 0;
    const Table allocated = kv_allocated_table(o.quick, cases);
    report.add_table(allocated);
    report.add_table(gpu_memory);

    Table per_step{.name = "step_times",
                   .title = "Per-step time for " + std::to_string(n) + " new tokens",
                   .columns = {{"step"}, {"no cache [ms]", 3}, {"cache [ms]", 3}}};
    for (int s = 1; s <= n; ++s)
      per_step.add_row({static_cast<long long>(s), steps_off[s - 1] * 1e3, steps_on[s - 1] * 1e3});
    report.add_table(per_step, /*print=*/false);
    report.add_plot({.name = "generation_time",
                     .table = "kv_cache_speedup",
                     .x = "generated tokens",
                     .y = {"no cache [s]", "KV cache [s]"},
                     .title = "Lab 02: time to generate N tokens",
                     .xlabel = "generated tokens",
                     .ylabel = "seconds"});
    report.add_plot({.name = "step_time",
                     .table = "step_times",
                     .x = "step",
                     .y = {"no cache [ms]", "cache [ms]"},
                     .title = "Lab 02: step time, recompute vs KV cache",
                     .xlabel = "generation step",
                     .ylabel = "time [ms]",
                     .logy = true});

    // The chapter's claims, each decided on this run's numbers.
    report.claim({.id = "02.same_tokens",
                  .source = "this lab",
                  .statement = "the KV cache changes no token",
                  .held = true,  // the lab stopped above had any run differed
                  .evidence = "every run of " + std::to_string(token_counts.size()) +
                              " lengths gave the same tokens on both paths (last hash " + hash + ")"});
    long unequal = 0;
    for (long r = 0; r < static_cast<long>(allocated.rows.size()); ++r)
      unequal += std::get<std::string>(allocated.cell(r, "equal")) != "yes";
    report.claim(
        {.id = "02.kv_bytes_formula",
         .source = "the KV cache article, §2-6",
         .statement = "KV bytes = 2 × layers × kv_heads × head_dim × L × B × bytes",
         .held = unequal == 0,
         .evidence = "the formula equals the bytes the engine's cache allocated in " + std::to_string(cases - unequal) +
                     " of " + std::to_string(cases) + " cases (MHA, GQA, MQA; tiny to qwen2.5-0.5b)",
         .cause = unequal == 0 ? "" : "the cache allocates by kv_bytes_per_token(), which differs from the formula"});
    const double kv8 = static_cast<double>(kv_cache_bytes(preset("llama-3-8b"), 2048, 1, DType::BF16)),
                 kv70 = static_cast<double>(kv_cache_bytes(preset("llama-3-70b"), 2048, 1, DType::BF16));
    const bool near = std::abs(kv8 / 270e6 - 1) < 0.02 && std::abs(kv70 / 670e6 - 1) < 0.02;
    report.claim(
        {.id = "02.llama_kv_sizes",
         .source = "the prefill/decode article (disaggregation)",
         .statement = "one 2,048-token request holds about 270 MB of KV on Llama-3-8B and 670 MB on 70B (bf16)",
         .held = near,
         .evidence = fixed(kv8 / 1e6, 1) + " MB and " + fixed(kv70 / 1e6, 1) + " MB by the formula",
         .cause = near ? "" : "the presets' shapes differ from the published models'"});
    const long r8 = gpu_memory.row_where("model", std::string("llama-3-8b")),
               r70 = gpu_memory.row_where("model", std::string("llama-3-70b"));
    const auto fits = [&](long row) { return gpu_memory.cell(row, "requests of 8,192"); };
    const bool budget = std::get<long long>(fits(r70)) == 0 && std::get<long long>(fits(r8)) > 0;
    report.claim({.id = "02.gpu_memory",
                  .source = "the KV cache article, §2-6",
                  .statement = "GPU memory holds weights + KV + activations + runtime, so the parameter count alone "
                               "does not say how many requests fit",
                  .held = budget,
                  .evidence = "on 80 GB, llama-3-8b's " + fixed(gpu_memory.number(r8, "weights [GB]"), 1) +
                              " GB of weights leave " + fixed(gpu_memory.number(r8, "left for KV [GB]"), 1) +
                              " GB for KV: " + std::to_string(std::get<long long>(fits(r8))) +
                              " requests of 8,192 tokens; llama-3-70b's " +
                              fixed(gpu_memory.number(r70, "weights [GB]"), 1) + " GB leave none",
                  .cause = budget ? "" : "the presets' sizes differ from the published models'"});
    const double speedup = speed.number(-1, "speedup");
    // Decode steps only (step 1 is the prefill): how each path's step time moves as the context grows.
    const auto decode_ms = [](const std::vector<double>& seconds) {
      std::vector<double> ms;
      for (std::size_t s = 1; s < seconds.size(); ++s) ms.push_back(seconds[s] * 1e3);
      return step_growth(ms);
    };
    const StepGrowth off = decode_ms(steps_off), on = decode_ms(steps_on);
    const std::string noise = "neighbouring steps differ by a median " + fixed(100 * off.noise, 0) +
                              "% (recompute) and " + fixed(100 * on.noise, 0) +
                              "% (cache): this run's timing noise; rerun on a quiet machine";
    report.claim({.id = "02.cache_faster",
                  .source = "the KV cache article, §2-5",
                  .statement = "generation is faster with the KV cache",
                  .held = speedup > 1,
                  .evidence = fixed(speedup, 2) + "x for " + std::to_string(n) + " new tokens (" +
                              fixed(speed.number(-1, "no cache [s]"), 3) + " s vs " +
                              fixed(speed.number(-1, "KV cache [s]"), 3) + " s)",
                  .cause = speedup > 1 ? "" : noise});
    const bool flatter = off.ratio() > 1 && on.ratio() < off.ratio();
    report.claim({.id = "02.cached_step_flat",
                  .source = "the KV cache article, §2-4",
                  .statement = "without the cache a decode step's time grows with the context; with it, it grows "
                               "less (about flat)",
                  .held = flatter,
                  .evidence = "from the first third of the decode steps to the last: cache " + fixed(on.ratio(), 2) +
                              "x (" + fixed(on.first, 2) + " to " + fixed(on.last, 2) + " ms), recompute " +
                              fixed(off.ratio(), 2) + "x (" + fixed(off.first, 2) + " to " + fixed(off.last, 2) +
                              " ms)",
                  .cause = flatter ? "" : noise});

    report.verdict("the KV cache gives the same tokens and is " + fixed(speedup, 1) + "x faster for " +
                   std::to_string(n) + " new tokens; the memory formula equals the allocated bytes in " +
                   std::to_string(cases - unequal) + " of " + std::to_string(cases) + " cases.");
    report.save();
  });
}
