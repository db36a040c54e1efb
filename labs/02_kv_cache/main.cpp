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
#include <iostream>
#include <tuple>

#include "core/error.h"
#include "lab.h"
#include "lab02.h"
#include "perf/hardware.h"

using namespace servelab::lab02;

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
    for (const auto& [run, lab, config] : {std::tuple{"no cache", 1, no_cache}, {"KV cache", 2, kv_cache}})
      record_configuration(report, run, lab, base, config);
    const SpeedRuns speed = speed_table(*model, o, no_cache, kv_cache, token_counts, prompt, fast_reductions);
    report.add_table(speed.table);
    if (lab_prompt.tokenizer && !speed.longest_on.empty()) {  // a real model: what both paths wrote, as text
      const std::string text = lab_prompt.tokenizer->decode(speed.longest_on.front().output_ids, true);
      std::cout << "Generated text (the same with and without the cache):\n\n> " << text << "\n\n";
      report.setting("generated text", text);
    }

    // 2. The work the cache removes, step by step, for the longest run.
    const int n = token_counts.back();
    const auto steps_off = median_steps(speed.longest_off), steps_on = median_steps(speed.longest_on);
    report.add_table(work_table(c, prompt_len, n, steps_off, steps_on));

    // 3-5. What the cache costs in memory.
    const Table memory = kv_memory_table(), gpu_memory = gpu_memory_table(gpu("A100 80GB SXM"));
    report.add_table(memory);
    int cases = 0;
    const Table allocated = kv_allocated_table(o.quick, cases);
    report.add_table(allocated);
    report.add_table(gpu_memory);

    report.add_table(step_times_table(n, steps_off, steps_on), /*print=*/false);
    report.add_plot({.name = "step_time",
                     .data = {.table = "step_times", .x = "step", .y = {"no cache [ms]", "cache [ms]"}},
                     .labels = {"Lab 02: step time, recompute vs KV cache", "generation step", "time [ms]"},
                     .logy = true});
    report.add_plot(
        {.name = "generation_time",
         .data = {.table = "kv_cache_speedup", .x = "generated tokens", .y = {"no cache [s]", "KV cache [s]"}},
         .labels = {"Lab 02: time to generate N tokens", "generated tokens", "seconds"}});

    check_claims(report, speed, allocated, cases, gpu_memory, steps_off, steps_on, token_counts.size(), n);
    report.save();
  });
}
