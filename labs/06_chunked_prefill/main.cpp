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
#include <algorithm>
#include <cctype>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "lab.h"
#include "lab06.h"
#include "workload/summary.h"

using namespace servelab;
using namespace servelab::lab;
using namespace servelab::lab06;

namespace {

// Lab 06's flags on @p app, over the defaults in @p f.
void add_flags(CLI::App& app, Flags& f) {
  app.add_option("--decoders", f.decoders, "head-of-line: requests decoding when the long prompt arrives")
      ->capture_default_str();
  app.add_option("--decode-len", f.decode_len, "head-of-line: tokens each decoder generates")->capture_default_str();
  app.add_option("--long-prompt", f.long_prompt, "head-of-line: tokens of the prompt that arrives")
      ->capture_default_str();
  app.add_option("--join-step", f.join_step, "head-of-line: the step at which the first long prompt arrives")
      ->capture_default_str();
  app.add_option("--long-prompts", f.num_long, "head-of-line: long prompts that arrive, one every --long-every steps")
      ->capture_default_str();
  app.add_option("--long-every", f.long_every, "head-of-line: steps between two long prompts' arrivals")
      ->capture_default_str();
  app.add_option("--budgets", f.budgets, "head-of-line: chunked budgets to compare with no chunking")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--sweep", f.sweep, "budget sweep: max_num_batched_tokens values")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--num-requests", f.num_requests, "budget sweep: requests")->capture_default_str();
  app.add_option("--prompt-len-dist", f.prompt_dist, "budget sweep: prompt lengths (workload.h forms)")
      ->capture_default_str();
  app.add_option("--output-len-dist", f.output_dist, "budget sweep: output lengths")->capture_default_str();
  app.add_option("--arrival", f.arrivals, "budget sweep: all, poisson:RATE or trace:FILE")->capture_default_str();
  app.add_option("--slo-ttft-ms", f.slo_ttft_ms, "goodput: most TTFT a request may take, ms")->capture_default_str();
  app.add_option("--slo-tpot-ms", f.slo_tpot_ms, "goodput: most TPOT a request may take, ms")->capture_default_str();
  app.add_option("--block-size", f.block_size, "tokens per KV block")->capture_default_str();
  app.add_option("--gpu-slo-ttft-ms", f.gpu_slo_ttft_ms, "simulated capacity: p99 TTFT limit, ms")
      ->capture_default_str();
  app.add_option("--gpu-slo-tpot-ms", f.gpu_slo_tpot_ms, "simulated capacity: p99 TPOT limit, ms")
      ->capture_default_str();
  app.add_option("--gpu-model", f.gpu_model, "simulated part: model preset")->capture_default_str();
  app.add_option("--gpu", f.gpu_name, "simulated part: hardware datasheet entry (perf/hardware.h)")
      ->capture_default_str();
  app.add_option("--gpu-requests", f.gpu_requests, "simulated part: requests")->capture_default_str();
  app.add_option("--sim-speed-requests", f.sim_speed_requests, "simulated part: requests of the timed speed check")
      ->capture_default_str();
  app.add_option("--gpu-rate", f.gpu_rate, "simulated part: Poisson arrival rate, requests/s")->capture_default_str();
  app.add_option("--gpu-overhead-ms", f.gpu_overhead_ms, "simulated part: fixed cost per step, ms")
      ->capture_default_str();
}

// --quick: smaller sizes for every flag not given.
void quick_sizes(const CLI::App& app, Flags& f) {
  const auto unset = [&](const char* flag) { return app.count(flag) == 0; };
  if (unset("--decoders")) f.decoders = 4;
  if (unset("--decode-len")) f.decode_len = 40;
  if (unset("--long-prompt")) f.long_prompt = 512;
  if (unset("--join-step")) f.join_step = 8;
  if (unset("--long-prompts")) f.num_long = 2;
  if (unset("--long-every")) f.long_every = 12;
  if (unset("--budgets")) f.budgets = {128};
  if (unset("--sweep")) f.sweep = {128, 512};
  if (unset("--num-requests")) f.num_requests = 8;
  if (unset("--prompt-len-dist")) f.prompt_dist = "uniform:32:256";
  if (unset("--arrival")) f.arrivals = "poisson:20";
  if (unset("--gpu-requests")) f.gpu_requests = 200;
  if (unset("--sim-speed-requests")) f.sim_speed_requests = 1000;
}

// Refuses a flag out of range before anything runs.
void check_flags(const Flags& f) {
  check(f.decoders >= 1, "--decoders must be >= 1, got ", f.decoders);
  check(f.decode_len >= 2, "--decode-len must be >= 2, got ", f.decode_len);
  check(f.long_prompt >= 1, "--long-prompt must be >= 1, got ", f.long_prompt);
  check(f.join_step >= 0, "--join-step must be >= 0, got ", f.join_step);
  check(f.num_long >= 1, "--long-prompts must be >= 1, got ", f.num_long);
  check(f.long_every >= 1, "--long-every must be >= 1, got ", f.long_every);
  for (int b : f.budgets) check(b >= 1, "--budgets: every budget must be >= 1, got ", b);
  for (int b : f.sweep) check(b >= 1, "--sweep: every budget must be >= 1, got ", b);
  check(f.slo_ttft_ms > 0 && f.slo_tpot_ms > 0, "--slo-ttft-ms and --slo-tpot-ms must be positive");
  check(f.gpu_requests >= 1, "--gpu-requests must be >= 1, got ", f.gpu_requests);
  check(f.sim_speed_requests >= 1, "--sim-speed-requests must be >= 1, got ", f.sim_speed_requests);
  check(f.gpu_rate > 0, "--gpu-rate must be positive, got ", f.gpu_rate);
  check(f.gpu_overhead_ms >= 0, "--gpu-overhead-ms must be >= 0, got ", f.gpu_overhead_ms);
  check(f.gpu_slo_ttft_ms > 0 && f.gpu_slo_tpot_ms > 0, "--gpu-slo-ttft-ms and --gpu-slo-tpot-ms must be positive");
  gpu(f.gpu_name);  // an unknown name is refused here, before anything runs
  preset(f.gpu_model);
}

std::string lowercase(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lab 06: chunked prefill, a token budget per step", "lab_06_chunked_prefill"};
  LabOptions o;
  add_common_options(app, o, "small");
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
    base.engine.block_size = f.block_size;
    use_config(*model, configure(Techniques::for_lab(5), base));  // before describe_run() prints the attention

    Report report("06_chunked_prefill", o.out);
    describe_run(report, *model, o);
    report.setting("timing", "one serving run per configuration, on the engine clock");
    report.setting("technique", "chunked prefill (Techniques::chunked_prefill) over lab 04's continuous batching");
    report.setting("head-of-line", std::to_string(f.decoders) + " requests decoding " + std::to_string(f.decode_len) +
                                       " tokens each; " + std::to_string(f.num_long) + " prompts of " +
                                       std::to_string(f.long_prompt) + " tokens join at step " +
                                       std::to_string(f.join_step) + " and every " + std::to_string(f.long_every) +
                                       " steps after");
    report.setting("sweep workload",
                   summarize_workload(workload).describe() + ", arrivals " + spec.arrivals.describe());
    report.setting("SLO", "TTFT <= " + std::to_string(static_cast<int>(f.slo_ttft_ms)) +
                              " ms, TPOT <= " + std::to_string(static_cast<int>(f.slo_tpot_ms)) +
                              " ms (goodput counts requests meeting both)");
    report.print_settings("Lab 06 — chunked prefill");

    // Room for every request of either experiment at once: memory is not what this lab is about.
    long total_sweep = 0;
    for (const auto& r : workload) total_sweep += static_cast<long>(r.prompt_ids.size()) + r.max_tokens;
    const long kv_tokens =
        std::max(static_cast<long>(f.decoders) * (32 + f.decode_len) + f.num_long * (f.long_prompt + 16L) + 64,
                 total_sweep + static_cast<long>(workload.size()) * f.block_size);
    base.engine.kv_cache_memory = kv_cache_bytes_for(c, 1, 1) * static_cast<std::size_t>(kv_tokens);

    Progress bar("serving", static_cast<long>(f.budgets.size() + 1) * (f.decoders * f.decode_len + 16) +
                                static_cast<long>(f.sweep.size()) * spec.num_requests * 64);
    StepSamples samples;
    const HeadOfLine hol = head_of_line(report, *model, base, f, bar, samples);
    report.add_table(hol.table);
    report.add_table(hol.steps, /*print=*/false);
    report.add_plot({.name = "head_of_line",
                     .table = "head_of_line_steps",
                     .x = "step",
                     .y = hol.steps.headers(1),
                     .title = "Lab 06: step time when long prompts join the decodes",
                     .xlabel = "step",
                     .ylabel = "step time [ms]",
                     .logy = true});

    const SLO slo{f.slo_ttft_ms / 1e3, f.slo_tpot_ms / 1e3};
    std::vector<ServingMetrics> real_sweep;
    report.add_table(budget_sweep(*model, base, workload, f.sweep, slo, bar, samples, real_sweep));
    report.add_plot({.name = "budget_sweep",
                     .table = "budget_sweep",
                     .x = "max_num_batched_tokens",
                     .y = {"TTFT p50 [ms]", "TTFT p99 [ms]", "TPOT p99 [ms]", "ITL p99 [ms]"},
                     .title = "Lab 06: the token budget trades TTFT against TPOT",
                     .xlabel = "max_num_batched_tokens",
                     .ylabel = "ms",
                     .logy = true});
    report.add_table(calibration(*model, base, workload, f.sweep, slo, samples, real_sweep));

    const GpuScale g = gpu_scale(f, spec);
    const Table gpu_table = gpu_simulated(g, f);
    const Capacity cap = capacity(g, f);
    report.add_table(gpu_table);
    report.add_table(cap.table);
    const RateSweep rates = rate_sweep(g, f, cap);
    report.add_table(rates.table);
    report.add_table(rates.plot, /*print=*/false);
    const std::string chunked_name = budget_name(true, cap.best_budget), plain_name = budget_name(false, 0);
    for (const char* metric : {"TTFT", "TPOT"})
      report.add_plot({.name = "rate_sweep_" + lowercase(metric),
                       .table = "rate_sweep_plot",
                       .x = "achieved [req/s]",
                       .y = {plain_name + " " + metric + " p99", chunked_name + " " + metric + " p99",
                             std::string(metric) + " SLO"},
                       .title = "Lab 06 (simulated): " + std::string(metric) + " p99 against throughput",
                       .xlabel = "achieved throughput [req/s]",
                       .ylabel = "ms",
                       .logy = true});
    report.add_table(simulator_speed(g, f, cap.best_budget));

    const Table& h = hol.table;
    const double stall_without = h.number(0, "longest stall [ms]"), stall_with = h.number(-1, "longest stall [ms]");
    const double p99_without = h.number(0, "ITL p99 [ms]"), p99_with = h.number(-1, "ITL p99 [ms]");
    std::ostringstream v;
    v << std::fixed << std::setprecision(1) << f.long_prompt << "-token prompts stall the decodes for up to "
      << stall_without << " ms without chunks and " << stall_with << " ms "
      << std::get<std::string>(h.cell(-1, "configuration"))
      << "; the decoders' token-gap p99 (the prefill/decode article's TPOT p99) " << p99_without << " -> " << p99_with
      << " ms, with the same tokens.";
    report.verdict(v.str());
    report.save();
  });
}
