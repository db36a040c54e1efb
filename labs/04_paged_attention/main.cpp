// SPDX-License-Identifier: MIT
/**
 * @file main.cpp
 * @brief Lab 04 — paged KV blocks and continuous batching: the two answers
 *        to serving many requests at once, one for space and one for time.
 *
 * Space: with every request's KV in one contiguous run, memory is reserved
 * for tokens that may never come and free space breaks into holes; with KV
 * in fixed-size blocks found through a block table (PagedAttention), the
 * only waste is the tail of each request's last block. Time: a static batch
 * waits for its longest member; continuous batching lets finished requests
 * leave and waiting ones join at every step. The lab measures both on the
 * engine's own scheduler and KV manager, then serves one workload with each
 * policy and checks every request got the same tokens.
 * @see labs/04_paged_attention/README.md
 */
#include <algorithm>
#include <iostream>

#include "core/error.h"
#include "lab.h"
#include "lab04.h"
#include "serve/engine.h"
#include "serve/metrics.h"
#include "workload/summary.h"
#include "workload/workload.h"
#include "serving.h"

using namespace servelab;
using namespace servelab::lab;
using namespace servelab::lab04;

namespace {

// Table 2 and each policy's run (the continuous one is the timeline's).
struct Serving {
  Table table{};
  std::vector<ServingRun> runs{};  // one at a time, static, continuous
  bool same_tokens = true;         // every request got the same tokens under every policy
  std::string mismatch{};          // the first request that did not, and how many
};

// 2. Time: one workload served by lab 03's rung, static batching and lab 04's rung on the real model: what
//    continuous batching buys in tokens/s and latency, with every request's tokens checked equal.
Serving serving_table(Report& report, Model& model, const LabConfig& base, const std::vector<WorkloadRequest>& workload,
                      bool fast_reductions) {
  const int max_num_seqs = base.engine.scheduler.max_num_seqs;  // the batch slots every policy has
  long total_output = 0;
  for (const auto& r : workload) total_output += r.max_tokens;
  Serving out;
  Table& serving = out.table;
  serving = {.name = "serving",
             .title = "Serving " + std::to_string(workload.size()) + " requests with each policy (" +
                      model.config().name + ")",
             .columns = {{"policy"},
                         {"output tok/s", 1},
                         {"vs one at a time", 2},
                         {"TTFT p50 [ms]", 1},
                         {"TTFT p99 [ms]", 1},
                         {"TPOT p50 [ms]", 2},
                         {"TPOT p99 [ms]", 2},
                         {"preemptions"},
                         {"busy [%]", 1},
                         {"mean batch", 1},
                         {"slots used [%]", 1},
                         {"steps"},
                         {"scheduler [% of step]", 2},
                         {"tokens hash"}}};
  // Lab 03's configuration (contiguous KV, one request at a time), static batching over paged blocks between,
  // and lab 04's (paged KV, continuous batching): the same base, the same workload.
  const auto [lab3, lab4] = compare_rungs(report, 4, base, "one at a time", "continuous");
  LabConfig static_batching = lab4;
  static_batching.engine.scheduler.policy = SchedulingPolicy::STATIC;
  std::vector<ServingRun>& runs = out.runs;
  Progress bar("serving", 3 * total_output);
  for (const LabConfig& config : {lab3, static_batching, lab4}) runs.push_back(serve(model, config, workload, bar));
  std::vector<std::string> mismatches;
  for (const ServingRun& r : runs) {
    long batched = 0;
    for (const StepStats& s : r.run.steps) batched += s.num_scheduled_requests;
    for (std::size_t i = 0; i < r.run.tokens.size(); ++i)
      if (r.run.tokens[i] != runs[0].run.tokens[i])
        mismatches.push_back(std::string(to_string(r.policy)) + " request " + std::to_string(i));
    const ServingMetrics& m = r.metrics;
    serving.add_row({std::string(to_string(r.policy)), m.output_tokens_per_second,
                     m.output_tokens_per_second / runs[0].metrics.output_tokens_per_second, 1e3 * m.ttft.median,
                     1e3 * m.ttft.p99, 1e3 * m.tpot.median, 1e3 * m.tpot.p99, static_cast<long long>(r.preemptions),
                     100 * r.busy / r.wall, static_cast<double>(batched) / r.run.steps.size(),
                     100.0 * batched / (static_cast<double>(r.run.steps.size()) * max_num_seqs),
                     static_cast<long long>(r.run.steps.size()), 100 * r.schedule / r.busy, r.run.tokens_hash()});
  }
  // Batch invariance is a CPU mode (cuBLAS picks its algorithm by shape), so on CUDA differences are reported, not fatal.
  const bool invariant = !fast_reductions && model.options().backend == Backend::CPU;
  if (invariant && !mismatches.empty())
    fail("lab 04: with batch-invariant reductions every policy must give each request the same tokens, but ",
         mismatches.front(), " differs (", mismatches.size(), " requests in all)");
  out.same_tokens = mismatches.empty();
  out.mismatch = mismatches.empty() ? "" : mismatches.front() + " (" + std::to_string(mismatches.size()) + " in all)";
  serving.note =
      std::string("Slots used: requests in a step over max_num_seqs (") + std::to_string(max_num_seqs) +
      "), averaged over the steps; busy: the share of the wall time spent in steps. " +
      (mismatches.empty() ? std::string("Every request got the same tokens under every policy (same hash)") +
                                (runs.back().preemptions > 0 ? ", preempted and recomputed ones included." : ".")
                          : std::to_string(mismatches.size()) +
                                " requests differ between policies without batch-invariant "
                                "reductions (first: " +
                                mismatches.front() + ").");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lab 04: paged KV blocks and continuous batching", "lab_04_paged_attention"};
  LabOptions o;
  add_common_options(app, o, "small");
  add_trace_options(app);  // --trace FILE: every engine run as a Chrome trace (labs/common/trace.h)
  int num_requests = 32, max_num_seqs = 16, max_num_batched_tokens = 2048, block_size = 16;
  std::string prompt_dist = "uniform:16:128", output_dist = "lognormal:48:1:4:512", arrivals = "all", workload_file;
  std::size_t kv_cache_memory = 0;
  double gpu_memory_utilization = 0;
  int memory_requests = 1000, memory_max_model_len = 2048, memory_seqs = 16;
  bool fast_reductions = false;
  auto* n_opt =
      app.add_option("--num-requests", num_requests, "requests in the serving workload")->capture_default_str();
  auto* p_opt = app.add_option("--prompt-len-dist", prompt_dist,
                               "prompt lengths: fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA[:MIN:MAX] or sharegpt")
                    ->capture_default_str();
  auto* out_opt = app.add_option("--output-len-dist", output_dist, "output lengths, same forms")->capture_default_str();
  app.add_option("--arrival", arrivals, "arrivals: all, poisson:RATE (requests/s) or trace:FILE")
      ->capture_default_str();
  app.add_option("--workload-file", workload_file, "JSONL workload (prompt_len or prompt_ids, output_len, arrival)");
  app.add_option("--max-num-seqs", max_num_seqs, "most requests in one step")->capture_default_str();
  app.add_option("--max-num-batched-tokens", max_num_batched_tokens,
                 "most tokens in one step (a whole prompt must fit)")
      ->capture_default_str();
  app.add_option("--block-size", block_size, "tokens per KV block")->capture_default_str();
  app.add_option(
      "--kv-cache-memory", kv_cache_memory,
      "KV bytes for serving; 0 = max-num-seqs requests of the workload's mean length (tight enough to preempt)");
  app.add_option(
      "--gpu-memory-utilization", gpu_memory_utilization,
      "with --backend cuda: share of device memory for weights + KV (vLLM's flag); overrides --kv-cache-memory");
  auto* mr_opt = app.add_option("--memory-requests", memory_requests, "requests in the KV placement dry run")
                     ->capture_default_str();
  app.add_option("--memory-max-model-len", memory_max_model_len,
                 "context a contiguous layout reserves per request (dry run)")
      ->capture_default_str();
  app.add_option("--memory-seqs", memory_seqs, "dry-run KV budget, in max-length requests")->capture_default_str();
  app.add_flag("--fast-reductions", fast_reductions,
               "OpenBLAS GEMMs instead of batch-invariant ones: tokens may then differ between policies, and the lab "
               "says where");

  return run_lab(app, argc, argv, [&] {
    if (o.quick) {
      if (n_opt->count() == 0) num_requests = 20;  // more than max_num_seqs: static and continuous differ
      if (p_opt->count() == 0) prompt_dist = "uniform:8:32";
      if (out_opt->count() == 0) output_dist = "uniform:8:24";
      if (mr_opt->count() == 0) memory_requests = 200;
    }
    check(num_requests >= 1, "--num-requests must be >= 1, got ", num_requests);
    check(memory_requests >= 1, "--memory-requests must be >= 1, got ", memory_requests);
    check(memory_max_model_len >= 2, "--memory-max-model-len must be >= 2, got ", memory_max_model_len);
    check(memory_seqs >= 1, "--memory-seqs must be >= 1, got ", memory_seqs);
    WorkloadSpec spec;
    spec.num_requests = workload_file.empty() ? num_requests : (n_opt->count() ? num_requests : 0);
    spec.prompt_len = parse_length_dist(prompt_dist, LengthRole::prompt, "--prompt-len-dist");
    spec.output_len = parse_length_dist(output_dist, LengthRole::output, "--output-len-dist");
    spec.arrivals = parse_arrivals(arrivals, "--arrival");
    spec.seed = o.seed;
    spec.file = workload_file;

    LabConfig base;
    base.model = model_options(o, /*deterministic=*/!fast_reductions);
    auto model = load_model(o, base.model);
    const ModelConfig& c = model->config();
    std::vector<WorkloadRequest> workload = make_workload(spec, c.vocab_size);
    const int clamped = clamp_to_context(workload, c.max_position_embeddings);
    long total_tokens = 0, longest = 0;
    for (const auto& r : workload) {
      const long n = static_cast<long>(r.prompt_ids.size()) + r.max_tokens;
      total_tokens += n;
      longest = std::max(longest, n);
    }
    EngineConfig& engine_config = base.engine;  // what the flags set; configure() adds the techniques
    engine_config.scheduler.max_num_seqs = max_num_seqs;
    engine_config.scheduler.max_num_batched_tokens = max_num_batched_tokens;
    engine_config.block_size = block_size;
    engine_config.max_model_len = static_cast<int>(longest);  // what a contiguous layout reserves per request
    engine_config.gpu_memory_utilization = gpu_memory_utilization;
    const std::size_t token_bytes = kv_cache_bytes_for(c, 1, 1);
    engine_config.kv_cache_memory =
        kv_cache_memory
            ? kv_cache_memory
            : std::max<std::size_t>(static_cast<std::size_t>(longest + block_size),
                                    static_cast<std::size_t>(max_num_seqs) * total_tokens / workload.size()) *
                  token_bytes;
    {  // Checked before anything is printed: a refused run leaves stdout empty.
      Engine probe(*model, configure(Techniques::for_lab(4), base).engine);
      for (const auto& r : workload) probe.add_request(r.prompt_ids, SamplingParams{}, r.max_tokens);
      engine_config.kv_cache_memory = probe.config().kv_cache_memory;  // as sized from the GPU's memory, if so
      engine_config.gpu_memory_utilization = 0;
    }

    Report report("04_paged_attention", o.out);
    describe_run(report, *model, o);
    report.setting("timing", "one serving run per policy, on the engine clock (no repeats: a server runs once)");
    report.setting("technique",
                   "paged KV blocks and continuous batching (Techniques::paged_kv_cache, "
                   "continuous_batching) over lab 02's KV cache, against one request at a time");
    report.setting("workload", summarize_workload(workload).describe() + ", arrivals " + spec.arrivals.describe() +
                                   (clamped ? ", " + std::to_string(clamped) + " clamped to the context" : "") +
                                   ", greedy");
    report.setting("engine", "block size " + std::to_string(block_size) + ", max_num_seqs " +
                                 std::to_string(max_num_seqs) + ", max_num_batched_tokens " +
                                 std::to_string(max_num_batched_tokens) + ", KV " +
                                 human_bytes(static_cast<double>(engine_config.kv_cache_memory)) + " (" +
                                 std::to_string(engine_config.kv_cache_memory / token_bytes) + " tokens)");
    report.print_settings("Lab 04 — paged KV blocks and continuous batching");

    // 1. Space: the KV cache article's example, then a workload through each KV layout (the scheduler without a model).
    const Table fragmentation = fragmentation_example(block_size);
    report.add_table(fragmentation);
    const KVMemory memory =
        kv_memory(memory_requests, memory_max_model_len, memory_seqs, o.seed, c.vocab_size, token_bytes);
    report.add_table(memory.table);
    report.add_table(memory.timeline, /*print=*/false);

    const Serving serving = serving_table(report, *model, base, workload, fast_reductions);
    report.add_table(serving.table);
    const ServingRun& cont = serving.runs.back();
    report.add_table(timeline_table(cont), /*print=*/false);
    report.add_plot({.name = "timeline",
                     .table = "timeline",
                     .x = "step",
                     .y = {"running requests", "waiting requests"},
                     .title = "Lab 04: continuous batching, requests per step",
                     .xlabel = "step",
                     .ylabel = "requests"});
    report.add_plot({.name = "timeline_blocks",
                     .table = "timeline",
                     .x = "step",
                     .y = {"tokens in step", "KV blocks used"},
                     .title = "Lab 04: continuous batching, tokens and KV blocks per step",
                     .xlabel = "step",
                     .ylabel = "count",
                     .logy = true});
    report.add_plot({.name = "kv_memory",
                     .table = "kv_memory_timeline",
                     .x = "progress [%]",
                     .y = memory.timeline.headers(1),
                     .title = "Lab 04: share of the KV budget holding real tokens",
                     .xlabel = "progress through the workload [%]",
                     .ylabel = "real KV [% of budget]"});

    // The chapter's claims, each decided on this run's numbers.
    const Table& f = fragmentation;
    const auto fits = [&](long row) { return std::get<std::string>(f.cell(row, "D fits")) == "yes"; };
    const bool fragmented =
        !fits(0) && f.number(0, "free after B [tokens]") >= f.number(0, "D needs [tokens]") && fits(1);
    report.claim({.id = "04.fragmentation",
                  .source = "the KV cache article, §4-1 and §4-2 (A, B, C); D and the 6,200-token room are this lab's",
                  .statement = "contiguous KV can refuse a request that fits in the free memory; blocks hold it",
                  .held = fragmented,
                  .evidence = plain_number(f.number(0, "free after B [tokens]")) + " tokens free, largest run " +
                              plain_number(f.number(0, "largest free run [tokens]")) + ", D needs " +
                              plain_number(f.number(0, "D needs [tokens]")) + ": contiguous " +
                              (fits(0) ? "fits" : "refuses") + " it, blocks of " + std::to_string(block_size) + " " +
                              (fits(1) ? "hold" : "refuse") + " it",
                  .cause = fragmented ? "" : "with this --block-size the blocks' rounding leaves too few for D"});
    const Table& mem = memory.table;
    const long paged16 = mem.row_where("block [tokens]", 16LL),
               contiguous = mem.row_where("layout", "contiguous (reserve max_model_len)");
    const double real16 = mem.number(paged16, "real of held [%]"),
                 real_contiguous = mem.number(contiguous, "real of held [%]");
    const bool as_paper = real16 > 90 && real_contiguous < 40;
    report.claim({.id = "04.real_of_held",
                  .source = "Kwon et al., PagedAttention (SOSP 2023): 20.4-38.2% before paging, ~96% in vLLM",
                  .statement = "paged blocks keep over 90% of the KV they hold real, contiguous reservations under 40%",
                  .held = as_paper,
                  .evidence = "blocks of 16: " + fixed(real16, 1) + "%, contiguous: " + fixed(real_contiguous, 1) +
                              "% (dry run, " + std::to_string(memory_requests) + " ShareGPT-like requests)",
                  .cause = as_paper ? ""
                           : real16 <= 90
                               ? "the requests are short against 16-token blocks: last-block slack takes " +
                                     fixed(mem.number(paged16, "last-block slack [%]"), 1) + "% of the budget"
                               : "the requests are long against --memory-max-model-len: reserved but unused KV is "
                                 "only " +
                                     fixed(mem.number(contiguous, "reserved, unused [%]"), 1) + "% of the budget"});
    const auto most_running = [&](long row) { return static_cast<long long>(mem.number(row, "most running")); };
    const bool more_running = most_running(paged16) > most_running(contiguous);
    report.claim(
        {.id = "04.more_requests",
         .source = "the KV cache article, §4-2",
         .statement = "in the same memory paged blocks run more requests at once",
         .held = more_running,
         .evidence = std::to_string(most_running(paged16)) + " at most with blocks of 16 vs " +
                     std::to_string(most_running(contiguous)) + " contiguous",
         .cause = more_running ? "" : "every request grows to --memory-max-model-len, so reserving it costs nothing"});
    report.claim({.id = "04.same_tokens",
                  .source = "this lab",
                  .statement = "every policy gives every request the same tokens",
                  .held = serving.same_tokens,
                  .evidence = std::to_string(workload.size()) + " requests under 3 policies, hash " +
                              serving.runs[0].run.tokens_hash(),
                  .cause = serving.same_tokens ? ""
                                               : "without batch-invariant reductions a row's sums depend on its "
                                                 "batch; first differing: " +
                                                     serving.mismatch});
    const Table& s = serving.table;
    const long one = s.row_where("policy", "one_at_a_time"), stat = s.row_where("policy", "static"),
               cont_row = s.row_where("policy", "continuous");
    const auto steps_of = [&](long row) { return static_cast<long long>(s.number(row, "steps")); };
    const bool fewer_steps = steps_of(cont_row) < steps_of(stat);
    const auto wall = [&](long row) { return serving.runs[static_cast<std::size_t>(row)].wall; };
    report.claim({.id = "04.fewer_steps",
                  .source = "the TTFT/TPOT article (Continuous Batching)",
                  .statement = "continuous batching finishes the workload in fewer steps than static batching",
                  .held = fewer_steps,
                  .evidence = std::to_string(steps_of(cont_row)) + " steps (" + fixed(wall(cont_row), 2) + " s) vs " +
                              std::to_string(steps_of(stat)) + " static (" + fixed(wall(stat), 2) + " s) and " +
                              std::to_string(steps_of(one)) + " one at a time",
                  .cause = fewer_steps ? ""
                                       : "every request fits in one batch (" + std::to_string(workload.size()) +
                                             " requests, --max-num-seqs " + std::to_string(max_num_seqs) +
                                             "), so no slot frees while others wait"});
    const auto slots = [&](long row) { return s.number(row, "slots used [%]"); };
    const bool idle_slots = slots(stat) < slots(cont_row);
    report.claim({.id = "04.static_idle_slots",
                  .source = "the TTFT/TPOT article (Continuous Batching: idle time)",
                  .statement = "static batching leaves batch slots idle that continuous batching fills",
                  .held = idle_slots,
                  .evidence = "slots used " + fixed(slots(stat), 1) + "% static vs " + fixed(slots(cont_row), 1) +
                              "% continuous (" + fixed(slots(one), 1) + "% one at a time) of " +
                              std::to_string(max_num_seqs) + " per step",
                  .cause = idle_slots ? ""
                                      : "every request fits in one batch and all arrive together, so neither "
                                        "policy has a waiting request to fill a freed slot"});
    const double ratio = s.number(cont_row, "vs one at a time");
    const auto step_ms = [&](long row) {
      const ServingRun& r = serving.runs[static_cast<std::size_t>(row)];
      return 1e3 * r.busy / static_cast<double>(r.run.steps.size());
    };
    report.claim({.id = "04.batching_throughput",
                  .source = "Yu et al., Orca (OSDI 2022); the TTFT/TPOT article",
                  .statement = "continuous batching serves more output tokens/s than one request at a time",
                  .held = ratio > 1,
                  .evidence = fixed(ratio, 2) + "x (" + fixed(s.number(cont_row, "output tok/s"), 1) + " vs " +
                              fixed(s.number(one, "output tok/s"), 1) + " tok/s)",
                  .cause = ratio > 1 ? ""
                                     : "a continuous step took a mean " + fixed(step_ms(cont_row), 2) +
                                           " ms for a mean batch of " + fixed(s.number(cont_row, "mean batch"), 1) +
                                           " against " + fixed(step_ms(one), 2) +
                                           " ms for one request: batching did not share the weight reads here"});
    report.verdict("paged blocks of 16 keep " + fixed(real16, 1) + "% of held KV real vs " + fixed(real_contiguous, 1) +
                   "% contiguous; continuous batching takes " + std::to_string(steps_of(cont_row)) +
                   " steps where static takes " + std::to_string(steps_of(stat)) + " and serves " + fixed(ratio, 1) +
                   "x the output tokens/s of one request at a time, with the same tokens.");
    report.save();
  });
}
