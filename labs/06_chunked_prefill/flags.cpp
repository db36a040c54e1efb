// SPDX-License-Identifier: MIT
/**
 * @file flags.cpp
 * @brief Lab 06's flags: their definitions, --quick's smaller sizes, and the range checks
 *        that refuse a bad value before anything runs.
 * @see labs/06_chunked_prefill/README.md
 */
#include "core/error.h"
#include "lab06.h"

namespace servelab::lab06 {

void add_flags(CLI::App& app, Flags& f) {
  const auto opt = [&](const char* name, auto& value, const char* help) {
    app.add_option(name, value, help)->capture_default_str();
  };
  const auto list = [&](const char* name, std::vector<int>& value, const char* help) {
    app.add_option(name, value, help)->delimiter(',')->capture_default_str();
  };
  opt("--decoders", f.decoders, "head-of-line: requests decoding when the long prompt arrives");
  opt("--decode-len", f.decode_len, "head-of-line: tokens each decoder generates");
  opt("--long-prompt", f.long_prompt, "head-of-line: tokens of the prompt that arrives");
  opt("--join-step", f.join_step, "head-of-line: the step at which the first long prompt arrives");
  opt("--long-prompts", f.num_long, "head-of-line: long prompts that arrive, one every --long-every steps");
  opt("--long-every", f.long_every, "head-of-line: steps between two long prompts' arrivals");
  list("--budgets", f.budgets, "head-of-line: chunked budgets to compare with no chunking");
  opt("--long-prefill-token-threshold", f.long_prefill_threshold,
      "chunked runs: most prompt tokens of one request in one step; 0 = only the budget limits");
  list("--sweep", f.sweep, "budget sweep: max_num_batched_tokens values");
  opt("--num-requests", f.num_requests, "budget sweep: requests");
  opt("--prompt-len-dist", f.prompt_dist, "budget sweep: prompt lengths (workload.h forms)");
  opt("--output-len-dist", f.output_dist, "budget sweep: output lengths");
  opt("--arrival", f.arrivals, "budget sweep: all, poisson:RATE or trace:FILE");
  opt("--slo-ttft-ms", f.slo_ttft_ms, "real runs' SLO: most TTFT, ms");
  opt("--slo-tbt-ms", f.slo_tbt_ms, "real runs' SLO: most time between two tokens (ITL; TPOT in vLLM's reading), ms");
  opt("--block-size", f.block_size, "tokens per KV block");
  opt("--gpu-slo-ttft-ms", f.gpu_slo_ttft_ms, "simulated SLO: most TTFT, ms");
  opt("--gpu-slo-tbt-ms", f.gpu_slo_tbt_ms, "simulated SLO: most time between two tokens, ms");
  opt("--strict-slo-ttft-ms", f.strict_slo_ttft_ms, "simulated 'not enough' table: the tens-of-ms TTFT limit");
  opt("--long-context-prompt", f.long_context_prompt, "simulated 'not enough' table: the long prompt, tokens");
  opt("--gpu-model", f.gpu_model, "simulated part: model preset");
  opt("--gpu", f.gpu_name, "simulated part: hardware datasheet entry (perf/hardware.h)");
  list("--gpu-sweep", f.gpu_sweep, "simulated part: chunked budgets");
  opt("--gpu-prompt-len-dist", f.gpu_prompt_dist, "simulated part: prompt lengths");
  opt("--gpu-output-len-dist", f.gpu_output_dist, "simulated part: output lengths");
  opt("--gpu-requests", f.gpu_requests, "simulated part: requests");
  opt("--sim-speed-requests", f.sim_speed_requests, "simulated part: requests of the timed speed check");
  opt("--gpu-rate", f.gpu_rate, "simulated part: Poisson arrival rate, requests/s");
  opt("--gpu-overhead-ms", f.gpu_overhead_ms, "simulated part: fixed cost per step, ms");
}

// --quick: smaller sizes for every measured flag not given (and fewer simulated requests).
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
  if (unset("--gpu-requests")) f.gpu_requests = 100;
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
  check(f.long_prefill_threshold >= 0,
        "--long-prefill-token-threshold must be >= 0 (0 = only the budget limits a chunk), got ",
        f.long_prefill_threshold);
  for (int b : f.budgets) check(b >= 1, "--budgets: every budget must be >= 1, got ", b);
  for (int b : f.sweep) check(b >= 1, "--sweep: every budget must be >= 1, got ", b);
  for (int b : f.gpu_sweep) check(b >= 1, "--gpu-sweep: every budget must be >= 1, got ", b);
  check(!f.budgets.empty() && !f.gpu_sweep.empty(), "--budgets and --gpu-sweep need at least one budget each");
  check(f.sweep.size() >= 2, "--sweep needs at least two budgets (a fit and a held-out one), got ", f.sweep.size());
  check(f.slo_ttft_ms > 0 && f.slo_tbt_ms > 0, "--slo-ttft-ms and --slo-tbt-ms must be positive");
  check(f.gpu_requests >= 1, "--gpu-requests must be >= 1, got ", f.gpu_requests);
  check(f.sim_speed_requests >= 1, "--sim-speed-requests must be >= 1, got ", f.sim_speed_requests);
  check(f.gpu_rate > 0, "--gpu-rate must be positive, got ", f.gpu_rate);
  check(f.gpu_overhead_ms >= 0, "--gpu-overhead-ms must be >= 0, got ", f.gpu_overhead_ms);
  check(f.gpu_slo_ttft_ms > 0 && f.gpu_slo_tbt_ms > 0, "--gpu-slo-ttft-ms and --gpu-slo-tbt-ms must be positive");
  check(f.strict_slo_ttft_ms > 0, "--strict-slo-ttft-ms must be positive, got ", f.strict_slo_ttft_ms);
  check(f.long_context_prompt >= 1, "--long-context-prompt must be >= 1, got ", f.long_context_prompt);
  const ModelConfig gpu_model = preset(f.gpu_model);
  check(f.long_context_prompt + 128 <= gpu_model.max_position_embeddings, "--long-context-prompt ",
        f.long_context_prompt, " + a 128-token answer exceeds max_position_embeddings (",
        gpu_model.max_position_embeddings, ") of ", f.gpu_model);
  gpu(f.gpu_name);  // an unknown name is refused here, before anything runs
}

}  // namespace servelab::lab06
