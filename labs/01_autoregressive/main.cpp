// SPDX-License-Identifier: MIT
/**
 * @file main.cpp
 * @brief Lab 01 — autoregressive generation with no KV cache.
 *
 * Every step feeds the whole sequence so far through the model (prefill of
 * the prompt, then prefill of prompt + 1 token, ...), exactly as
 * transformers' generate(use_cache=False) does. The lab prints the cost of
 * each step, TTFT and TPOT, and checks that the tokens equal the engine's
 * reference path (KV cache on), so lab 02 can turn the cache on knowing
 * the baseline is right.
 * @see labs/01_autoregressive/README.md
 */
#include <algorithm>
#include <cmath>
#include <iostream>

#include "core/error.h"
#include "lab.h"
#include "lab01.h"
#include "perf/work.h"
#include "serve/generate.h"
#include "serve/ladder.h"

using namespace servelab::lab;

int main(int argc, char** argv) {
  CLI::App app{"Lab 01: autoregressive generation, recomputing the whole sequence every step", "lab_01_autoregressive"};
  LabOptions o;
  add_common_options(app, o, "small");
  int prompt_len = 64, max_new_tokens = 64;
  auto* prompt_opt = app.add_option("--prompt-len", prompt_len, "prompt length in tokens")->capture_default_str();
  auto* new_opt = app.add_option("--max-new-tokens", max_new_tokens, "tokens to generate")->capture_default_str();

  return run_lab(app, argc, argv, [&] {
    if (o.quick) {  // a smoke run: small sizes unless given, one timed run
      if (prompt_opt->count() == 0) prompt_len = 16;
      if (new_opt->count() == 0) max_new_tokens = 12;
      quick_timing(app, o);
    }
    check(max_new_tokens >= 2, "--max-new-tokens must be >= 2 (TPOT needs a second token), got ", max_new_tokens);
    LabConfig base;
    base.model = model_options(o, /*deterministic=*/true);
    auto model = load_model(o, base.model);
    const LabPrompt lab_prompt = article_prompt(o, model->config(), prompt_len);
    const auto& prompt = lab_prompt.ids;
    prompt_len = static_cast<int>(prompt.size());
    // The ladder's first rung, and lab 02's as the reference the tokens must equal.
    base.engine.max_model_len = prompt_len + max_new_tokens;  // the one contiguous region a request fills
    const LabConfig recompute = configure(Techniques::for_lab(1), base),
                    cached = configure(Techniques::for_lab(2), base);
    // Checked before anything is printed: a refused run leaves stdout empty.
    check(prompt_len + max_new_tokens <= model->config().max_position_embeddings, "--prompt-len ", prompt_len,
          " + --max-new-tokens ", max_new_tokens, " exceeds max_position_embeddings (",
          model->config().max_position_embeddings, ") of ", model->config().name);

    Report report("01_autoregressive", o.out);
    describe_run(report, *model, o);
    report.setting("technique", "none: KV cache off, every step recomputes the whole sequence");
    report.setting("workload", lab_prompt.description + ", greedy, " + std::to_string(max_new_tokens) + " new tokens");
    report.print_settings("Lab 01 — autoregressive generation, no KV cache");

    GenerateOptions gen;
    gen.max_new_tokens = max_new_tokens;
    gen.use_kv_cache = recompute.engine.enable_kv_cache;
    use_config(*model, recompute);
    record_configuration(report, "recompute", 1, base, recompute);
    std::vector<GenerateResult> runs;
    {
      Progress bar("generating", static_cast<long>(o.warmup + o.repeats) * max_new_tokens);
      for (int i = 0; i < o.warmup + o.repeats; ++i) {
        GenerateResult r = generate(*model, prompt, gen, [&](std::int32_t) { bar.advance(); });
        if (i >= o.warmup) runs.push_back(std::move(r));
      }
    }
    for (const auto& r : runs)
      check(r.output_ids == runs[0].output_ids, "lab 01: two runs of the same greedy request gave different tokens");
    GenerateOptions reference = gen;
    reference.use_kv_cache = cached.engine.enable_kv_cache;
    use_config(*model, cached);
    record_configuration(report, "reference", 2, base, cached);
    const auto& out = runs[0].output_ids;
    try {
      const auto ref = generate(*model, prompt, reference);
      if (ref.output_ids != out) {
        const auto at = std::mismatch(out.begin(), out.end(), ref.output_ids.begin()).first - out.begin();
        fail("lab 01: recompute path and reference path (KV cache) differ first at new token ", at, ": ", out[at],
             " vs ", ref.output_ids[at]);
      }
    } catch (const NotImplemented& e) {  // a starter tree of lab 02: its cache is the student's still
      std::cerr << "lab 01: the check against the KV-cache path is skipped (" << e.what() << ")\n";
    }

    Table steps{.name = "steps",
                .title = "Per-step cost without a KV cache",
                .columns = {"step", "phase", "context [tok]", "processed [tok]", Column{"time [ms]", 2},
                            Column{"min [ms]", 2}, Column{"max [ms]", 2}}};
    std::vector<double> ttft, tpot, e2e, itl;  // ms; itl: every gap of every run
    for (const auto& r : runs) {
      const RequestMetrics m = r.metrics();
      ttft.push_back(m.ttft * 1e3);
      tpot.push_back(m.tpot * 1e3);
      e2e.push_back(m.e2e * 1e3);
      for (double gap : m.itl) itl.push_back(gap * 1e3);
    }
    const int shown_every = std::max(1, max_new_tokens / 16);
    for (int s = 0; s < static_cast<int>(out.size()); ++s) {
      std::vector<double> ms;
      for (const auto& r : runs) ms.push_back(r.step_seconds[s] * 1e3);
      const Summary t = summarize(ms);
      steps.add_row({static_cast<long long>(s + 1), std::string(s == 0 ? "prefill" : "decode"),
                     static_cast<long long>(prompt_len + s), static_cast<long long>(runs[0].step_tokens[s]), t.median,
                     t.min, t.max});
    }
    Table shown = steps;  // the terminal gets every k-th row; steps.csv gets all of them
    shown.name = "steps_shown";
    shown.rows.clear();
    for (std::size_t r = 0; r < steps.rows.size(); ++r)
      if (r % shown_every == 0 || r + 1 == steps.rows.size()) shown.rows.push_back(steps.rows[r]);
    if (shown_every > 1)
      shown.note = "(every " + std::to_string(shown_every) + "th step shown; all steps are in steps.csv)";
    report.add_table(shown);
    report.add_table(steps, /*print=*/false);

    Table latency{.name = "latency",
                  .title = "Request latency (vLLM definitions)",
                  .columns = {"metric", Column{"median [ms]", 2}, Column{"p99 [ms]", 2}, Column{"min [ms]", 2},
                              Column{"max [ms]", 2}},
                  .note = "TPOT = (E2E - TTFT) / (output tokens - 1); ITL = gap between consecutive tokens."};
    for (auto [name, v] : {std::pair{"TTFT", &ttft}, {"TPOT", &tpot}, {"ITL", &itl}, {"E2E", &e2e}}) {
      const Summary s = summarize(*v);
      latency.add_row({std::string(name), s.median, s.p99, s.min, s.max});
    }
    report.add_table(latency);
    if (lab_prompt.tokenizer) {
      std::cout << "Generated text:\n\n> " << lab_prompt.tokenizer->decode(out, /*skip_special_tokens=*/true) << "\n\n";
      report.setting("generated text", lab_prompt.tokenizer->decode(out, true));
    }

    report.add_plot({.name = "step_time",
                     .data = {.table = "steps", .x = "step", .y = {"time [ms]"}},
                     .labels = {"Lab 01: step time without a KV cache", "generation step", "time [ms]"}});
    lab01::check_claims(report, steps, *model, prompt_len, max_new_tokens, runs);
    report.save();
  });
}
