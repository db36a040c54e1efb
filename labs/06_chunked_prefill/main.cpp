// SPDX-License-Identifier: MIT
/**
 * @file main.cpp
 * @brief Lab 06 — chunked prefill: a token budget per step, so one long
 *        prompt no longer stalls every decoding request for a whole step.
 *
 * With continuous batching (lab 04) a 2,048-token prompt joins a step beside
 * the running decodes, and that step lasts as long as the prefill: every
 * decoding request waits, and its TPOT p99 jumps (head-of-line blocking,
 * the prefill/decode article). Chunked prefill caps each step at max_num_batched_tokens,
 * decodes first, and feeds the prompt in chunks over several steps; the
 * chunks meet again in the KV cache. The lab measures the stall with and
 * without chunks, then sweeps the budget on a mixed workload.
 * @see labs/06_chunked_prefill/README.md
 */
#include <cctype>

#include "core/error.h"
#include "lab.h"
#include "lab06.h"
#include "workload/summary.h"

using namespace servelab::lab06;

namespace {

std::string lowercase(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lab 06: chunked prefill, a token budget per step", "lab_06_chunked_prefill"};
  LabOptions o;
  add_serving_options(app, o, "small");
  Flags f;
  add_flags(app, f);

  return run_lab(app, argc, argv, [&] {
    if (o.quick) quick_sizes(app, f);
    check_flags(f);
    WorkloadSpec spec;
    spec.num_requests = f.num_requests;
    spec.prompt_len = parse_length_dist(f.prompt_dist, LengthRole::prompt, "--prompt-len-dist");
    spec.output_len = parse_length_dist(f.output_dist, LengthRole::output, "--output-len-dist");
    spec.arrivals = parse_arrivals(f.arrivals, "--arrival");
    spec.seed = o.seed;
    const GpuScale g = gpu_scale(f, o.seed);

    LabConfig base;
    base.model = model_options(o, /*deterministic=*/true);
    auto model = load_model(o, base.model);
    const ModelConfig& c = model->config();
    check(f.long_prompt + 16 <= c.max_position_embeddings, "--long-prompt ", f.long_prompt,
          " + 16 output tokens exceeds max_position_embeddings (", c.max_position_embeddings, ") of ", c.name);
    check(32 + f.decode_len <= c.max_position_embeddings, "--decode-len ", f.decode_len,
          " + a 32-token prompt exceeds ", "max_position_embeddings (", c.max_position_embeddings, ") of ", c.name);
    std::vector<WorkloadRequest> workload = make_workload(spec, c.vocab_size);
    clamp_to_context(workload, c.max_position_embeddings);
    // Lab 05's configuration (flash attention keeps long prompt chunks cheap) and lab 06's, over one base.
    base.engine.scheduler.max_num_seqs = 256;
    base.engine.scheduler.long_prefill_token_threshold = f.long_prefill_threshold;
    base.engine.block_size = f.block_size;
    use_config(*model, configure(Techniques::for_lab(5), base));  // before describe_run() prints the attention

    const LatencySLO slo{f.slo_ttft_ms / 1e3, f.slo_tbt_ms / 1e3};
    Report report("06_chunked_prefill", o.out);
    describe_run(report, *model, o);
    report.setting("timing", "one serving run per configuration, on the engine clock");
    report.setting("technique",
                   "chunked prefill (Techniques::chunked_prefill) over lab 04's continuous batching, "
                   "--long-prefill-token-threshold " +
                       std::to_string(f.long_prefill_threshold));
    report.setting("head-of-line", std::to_string(f.decoders) + " requests decoding " + std::to_string(f.decode_len) +
                                       " tokens each; " + std::to_string(f.num_long) + " prompts of " +
                                       std::to_string(f.long_prompt) + " tokens join at step " +
                                       std::to_string(f.join_step) + " and every " + std::to_string(f.long_every) +
                                       " steps after");
    report.setting("sweep workload",
                   summarize_workload(workload).describe() + ", arrivals " + spec.arrivals.describe());
    report.setting("real SLO", slo.describe() + " (this CPU's tables)");
    report.setting("simulated", g.what() + ", " + plain_number(f.gpu_overhead_ms) + " ms per step");
    report.setting("simulated SLO", g.slo.describe() + " (every simulated table)");
    report.setting("GPU workload", std::to_string(f.gpu_requests) + " requests, prompts " + f.gpu_prompt_dist +
                                       ", outputs " + f.gpu_output_dist + ", poisson:" + plain_number(f.gpu_rate));
    report.setting("metrics",
                   "ITL = every token gap (TBT; its p99 is the prefill/decode article's 'TPOT p99'), "
                   "TPOT = vLLM's per-request mean gap");
    report.print_settings("Lab 06 — chunked prefill");

    // Room for every request of either experiment at once: memory is not what this lab is about.
    long total_sweep = 0;
    for (const auto& r : workload) total_sweep += static_cast<long>(r.prompt_ids.size()) + r.max_tokens;
    const long kv_tokens =
        std::max(static_cast<long>(f.decoders) * (32 + f.decode_len) + f.num_long * (f.long_prompt + 16L) + 64,
                 total_sweep + static_cast<long>(workload.size()) * f.block_size);
    base.engine.kv_cache_memory = kv_cache_bytes_for(c, 1, 1) * static_cast<std::size_t>(kv_tokens);

    const ArticleSplit split = article_split(report, g);
    report.add_table(split.table);

    Progress bar("serving", static_cast<long>(f.budgets.size() + 1) * (f.decoders * f.decode_len + 16) +
                                static_cast<long>(f.sweep.size()) * spec.num_requests * 64);
    StepSamples samples;
    const HeadOfLine hol = head_of_line(report, *model, base, f, bar, samples);
    report.add_table(hol.table);
    report.add_table(hol.steps, /*print=*/false);
    const auto plot = [&](const std::string& name, PlotData data, PlotLabels labels) {
      report.add_plot({.name = name, .data = std::move(data), .labels = std::move(labels), .logy = true});
    };
    plot("head_of_line", columns_of(hol.steps),
         {"Lab 06: step time when long prompts join the decodes", "step", "step time [ms]"});

    const BudgetSweep sweep = budget_sweep(*model, base, workload, f.sweep, slo, bar, samples);
    report.add_table(sweep.table);
    plot("budget_sweep",
         {.table = "budget_sweep",
          .x = "max_num_batched_tokens",
          .y = {"TTFT p50 [ms]", "TTFT p99 [ms]", "ITL p99 [ms]", "TPOT p99 [ms]"}},
         {"Lab 06: the token budget, TTFT against the token gaps", "max_num_batched_tokens", "ms"});
    report.add_table(calibration(*model, base, workload, f.sweep, slo, samples, sweep));

    const Table gpu_table = gpu_simulated(g, f);
    const Capacity cap = capacity(g, f);
    report.add_table(gpu_table);
    report.add_table(cap.table);
    const RateSweep rates = rate_sweep(g, f, cap);
    report.add_table(rates.table);
    report.add_table(rates.plot, /*print=*/false);
    const std::string chunked_name = budget_name(true, cap.best_budget), plain_name = budget_name(false, 0);
    for (const char* metric : {"TTFT", "ITL"})
      plot("rate_sweep_" + lowercase(metric),
           {.table = rates.plot.name,
            .x = "achieved [req/s]",
            .y = {plain_name + " " + metric + " p99", chunked_name + " " + metric + " p99",
                  std::string(metric) + " SLO"}},
           {"Lab 06 (simulated): " + std::string(metric) + " p99 against throughput", "achieved throughput [req/s]",
            "ms"});
    const NotEnough limits = not_enough(g, f, cap);
    report.add_table(limits.table);
    report.add_table(simulator_speed(g, f, cap.best_budget));

    check_claims(report, f, g, split, hol, sweep, gpu_table, cap, limits);
    report.save();
  });
}
