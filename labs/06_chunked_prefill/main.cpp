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

std::string lowercase(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lab 06: chunked prefill, a token budget per step", "lab_06_chunked_prefill"};
  LabOptions o;
  add_common_options(app, o, "small");
  add_trace_options(app);  // --trace FILE: every engine run as a Chrome trace (labs/common/trace.h)
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
    const auto plot = [&](const std::string& name, const std::string& table, const std::string& x,
                          std::vector<std::string> y, const std::string& title, const std::string& xlabel,
                          const std::string& ylabel) {
      report.add_plot({.name = name,
                       .table = table,
                       .x = x,
                       .y = std::move(y),
                       .title = title,
                       .xlabel = xlabel,
                       .ylabel = ylabel,
                       .logy = true});
    };
    plot("head_of_line", "head_of_line_steps", "step", hol.steps.headers(1),
         "Lab 06: step time when long prompts join the decodes", "step", "step time [ms]");

    const BudgetSweep sweep = budget_sweep(*model, base, workload, f.sweep, slo, bar, samples);
    report.add_table(sweep.table);
    plot("budget_sweep", "budget_sweep", "max_num_batched_tokens",
         {"TTFT p50 [ms]", "TTFT p99 [ms]", "ITL p99 [ms]", "TPOT p99 [ms]"},
         "Lab 06: the token budget, TTFT against the token gaps", "max_num_batched_tokens", "ms");
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
      plot("rate_sweep_" + lowercase(metric), "rate_sweep_plot", "achieved [req/s]",
           {plain_name + " " + metric + " p99", chunked_name + " " + metric + " p99", std::string(metric) + " SLO"},
           "Lab 06 (simulated): " + std::string(metric) + " p99 against throughput", "achieved throughput [req/s]",
           "ms");
    const NotEnough limits = not_enough(g, f, cap);
    report.add_table(limits.table);
    report.add_table(simulator_speed(g, f, cap.best_budget));

    check_claims(report, f, g, split, hol, sweep, gpu_table, cap, limits);
    report.save();
  });
}
