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
                 .columns = {{"step"},
                             {"time [s]", 3},
                             {"running requests"},
                             {"waiting requests"},
                             {"tokens in step"},
                             {"KV blocks used"}}};
  for (std::size_t i = 0; i < cont.run.steps.size(); ++i) {
    const StepStats& s = cont.run.steps[i];
    timeline.add_row({static_cast<long long>(i), s.start, static_cast<long long>(s.num_scheduled_requests),
                      static_cast<long long>(s.num_waiting), static_cast<long long>(s.num_scheduled_tokens),
                      static_cast<long long>(s.num_used_blocks)});
  }
  return timeline;
}

}  // namespace servelab::lab04
