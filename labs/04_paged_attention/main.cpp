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

using namespace servelab::lab04;

int main(int argc, char** argv) {
  CLI::App app{"Lab 04: paged KV blocks and continuous batching", "lab_04_paged_attention"};
  LabOptions o;
  add_serving_options(app, o, "small");
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
    prefix_cache_section(report, *model, configure(Techniques::for_lab(4), base), o.quick);
    report.add_plot({.name = "timeline",
                     .data = {.table = "timeline", .x = "step", .y = {"running requests", "waiting requests"}},
                     .labels = {"Lab 04: continuous batching, requests per step", "step", "requests"}});
    report.add_plot({.name = "timeline_blocks",
                     .data = {.table = "timeline", .x = "step", .y = {"tokens in step", "KV blocks used"}},
                     .labels = {"Lab 04: continuous batching, tokens and KV blocks per step", "step", "count"},
                     .logy = true});
    report.add_plot({.name = "kv_memory",
                     .data = columns_of(memory.timeline),
                     .labels = {"Lab 04: share of the KV budget holding real tokens",
                                "progress through the workload [%]", "real KV [% of budget]"}});

    check_claims(report, fragmentation, memory, serving, workload.size(), block_size, max_num_seqs, memory_requests);
    report.save();
  });
}
