// SPDX-License-Identifier: MIT
/**
 * @file time.cpp
 * @brief Lab 04's time side: one policy's serving run over the workload on
 *        the real model, and the continuous run's step-by-step timeline
 *        (lab04.h).
 * @see labs/04_paged_attention/README.md
 */
#include <iostream>
#include <string>

#include "core/error.h"
#include "lab04.h"

namespace servelab::lab04 {

using namespace servelab::lab;

ServingRun serve(Model& model, const LabConfig& lab_config, const std::vector<WorkloadRequest>& workload,
                 Progress& bar) {
  const SchedulingPolicy policy = lab_config.engine.scheduler.policy;
  EngineConfig config = lab_config.engine;
  std::vector<std::string> log;
  config.log = [&](const std::string& line) { log.push_back(line); };
  use_config(model, lab_config);
  Engine engine(model, config);
  ServingRun out{.policy = policy};
  // Requests join when their arrival time has come (engine clock); the timeline is kept step by step.
  out.run = serve_workload(engine, workload, [&](Engine&, const StepStats& s, std::span<const RequestOutput> outputs) {
    bar.advance(static_cast<long>(outputs.size()));
    out.busy += s.forward_seconds + s.schedule_seconds;
    out.schedule += s.schedule_seconds;
  });
  out.wall = engine.now();
  out.preemptions = engine.scheduler().num_preemptions();
  out.metrics = summarize_requests(out.run.requests);
  for (const std::string& line : log) std::cerr << "lab_04 (" << to_string(policy) << "): " << line << "\n";
  return out;
}

Table timeline_table(const ServingRun& cont) {
  Table timeline{.name = "timeline",
                 .title = "Continuous batching, step by step",
                 .columns = {"step", Column{"time [s]", 3}, "running requests", "waiting requests", "tokens in step",
                             "KV blocks used"}};
  for (std::size_t i = 0; i < cont.run.steps.size(); ++i) {
    const StepStats& s = cont.run.steps[i];
    timeline.add_row({static_cast<long long>(i), s.start, static_cast<long long>(s.num_scheduled_requests),
                      static_cast<long long>(s.num_waiting), static_cast<long long>(s.num_scheduled_tokens),
                      static_cast<long long>(s.num_used_blocks)});
  }
  return timeline;
}

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
             .columns = {"policy", Column{"output tok/s", 1}, Column{"vs one at a time", 2}, Column{"TTFT p50 [ms]", 1},
                         Column{"TTFT p99 [ms]", 1}, Column{"TPOT p50 [ms]", 2}, Column{"TPOT p99 [ms]", 2},
                         "preemptions", Column{"busy [%]", 1}, Column{"mean batch", 1}, Column{"slots used [%]", 1},
                         "steps", Column{"scheduler [% of step]", 2}, "tokens hash"}};
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

}  // namespace servelab::lab04
