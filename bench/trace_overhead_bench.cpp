// SPDX-License-Identifier: MIT
// What --trace costs a step: the same continuous-batching workload on the `small`
// preset served without an observer and with a ChromeTrace attached, alternated
// so that machine noise hits both alike; prints the median step time of each,
// their difference as a share of a step, and the writer's own time per step
// (timed around ChromeTrace::on_step). A measurement, never asserted.
//
// usage: bench_trace_overhead [rounds (3)] [trace file (/tmp/servelab_trace_bench.json)]
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/stats.h"
#include "core/timer.h"
#include "model/model.h"
#include "serve/engine.h"
#include "trace/chrome_trace.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;

namespace {

/// Forwards to the trace and times its on_step: the writer's share of the observer's cost.
struct Timed final : StepObserver {
  explicit Timed(ChromeTrace& t) : trace(t) {}
  void on_request(const RequestEvent& e) override { trace.on_request(e); }
  void on_step(const StepRecord& r) override {
    const double t0 = now_seconds();
    trace.on_step(r);
    seconds += now_seconds() - t0;
  }
  ChromeTrace& trace;
  double seconds = 0;
};

/// Serves 16 requests (prompts 64..124 tokens, 64 outputs); returns every step's wall seconds.
std::vector<double> serve(Model& model, StepObserver* observer, ChromeTrace* trace) {
  EngineConfig config;
  config.scheduler.max_num_seqs = 16;
  Engine engine(model, config);
  if (trace) trace->begin_run("bench", false);
  if (observer) engine.add_observer(observer);
  for (int i = 0; i < 16; ++i) engine.add_request(synthetic_prompt(64 + 4 * i, model.config().vocab_size, i), {}, 64);
  std::vector<double> steps;
  while (engine.has_unfinished_requests()) {
    const double t0 = now_seconds();
    engine.step();
    steps.push_back(now_seconds() - t0);
  }
  if (trace) trace->end_run(engine.now());
  return steps;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::stoi(argv[1])) : 3;
  const std::string path = argc > 2 ? argv[2] : "/tmp/servelab_trace_bench.json";
  ModelOptions options;
  options.num_threads = 2;
  auto model = Model::from_preset("small", 0, options);
  ChromeTrace trace(path);
  Timed timed(trace);
  std::vector<double> off, on;
  serve(*model, nullptr, nullptr);  // warm-up
  for (int r = 0; r < rounds; ++r) {
    const auto a = serve(*model, nullptr, nullptr);
    const auto b = serve(*model, &timed, &trace);
    off.insert(off.end(), a.begin(), a.end());
    on.insert(on.end(), b.begin(), b.end());
  }
  trace.close();
  const double m_off = summarize(off).median, m_on = summarize(on).median;
  std::printf("small preset, 16 requests, %d rounds, %zu steps each way\n", rounds, off.size());
  std::printf("median step: %.3f ms without --trace, %.3f ms with (%+.2f%%)\n", m_off * 1e3, m_on * 1e3,
              (m_on / m_off - 1) * 100);
  std::printf("trace writer: %.1f us per step = %.3f%% of the median step; %s\n", timed.seconds / on.size() * 1e6,
              timed.seconds / on.size() / m_off * 100, trace.summary().c_str());
  return 0;
}
