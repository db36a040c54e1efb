// SPDX-License-Identifier: MIT
/**
 * @file measured.cpp
 * @brief Lab 06's measured tables: (1) head-of-line blocking with and without
 *        chunks, (2) the token budget sweep, (3) the cost model fitted to
 *        their steps and checked on held-out ones.
 * @see labs/06_chunked_prefill/README.md
 */
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "lab06.h"
#include "workload/synthetic_prompt.h"

namespace servelab::lab06 {

// 1. Head-of-line blocking: steady decodes, and a long prompt every few steps, without chunks and with each
//    budget. One stall hits one of a decoder's ~160 token intervals, below what a p99 sees; a stream of long
//    prompts is what a server meets. Shows the stall chunking removes, with the same tokens.
HeadOfLine head_of_line(Report& report, Model& model, const LabConfig& base, const Flags& f, Progress& bar,
                        StepSamples& samples) {
  const ModelConfig& c = model.config();
  std::vector<std::pair<bool, int>> configs = {{false, f.long_prompt + f.decoders}};
  for (int b : f.budgets) configs.push_back({true, b});
  HeadOfLine out{
      .table = {.name = "head_of_line",
                .title = std::to_string(f.num_long) + " prompts of " + std::to_string(f.long_prompt) + " tokens join " +
                         std::to_string(f.decoders) + " decoding requests",
                .columns = {{"configuration"},
                            {"ITL p50 [ms]", 2},
                            {"ITL p99 [ms]", 2},
                            {"longest stall [ms]", 1},
                            {"TPOT p50 [ms]", 2},
                            {"TPOT p99 [ms]", 2},
                            {"long prompts' TTFT p50 [ms]", 1},
                            {"steps with prefill"},
                            {"steps"},
                            {"tokens hash"}}},
      .steps = {
          .name = "head_of_line_steps", .title = "Step time around the long prompt's arrival", .columns = {{"step"}}}};
  Table& hol = out.table;
  std::vector<std::vector<double>> step_ms;
  std::string first_hash;
  for (const auto& [chunked, budget] : configs) {
    const LabConfig config = lab_config(chunked, base, budget);
    record_configuration(report, "head-of-line, " + budget_name(chunked, budget), chunked ? 6 : 5,
                         with_budget(base, budget), config);
    use_config(model, config);
    Engine engine(model, config.engine);
    std::vector<int> long_ids;
    // Arrivals keyed to steps, not seconds: the decoders meet each long prompt at the same point on any machine.
    const auto add_long = [&](int steps_run) {
      if (steps_run >= f.join_step && (steps_run - f.join_step) % f.long_every == 0 &&
          std::ssize(long_ids) < f.num_long)
        long_ids.push_back(engine.add_request(synthetic_prompt(f.long_prompt, c.vocab_size, 7 + long_ids.size()),
                                              SamplingParams{}, 16));
    };
    for (int d = 0; d < f.decoders; ++d)
      engine.add_request(synthetic_prompt(32, c.vocab_size, 100 + d), SamplingParams{}, f.decode_len);
    add_long(0);
    int steps_run = 0;
    const ServedRun run =
        serve_workload(engine, {}, [&](Engine&, const StepStats&, std::span<const RequestOutput> outputs) {
          bar.advance(static_cast<long>(outputs.size()));
          add_long(++steps_run);
        });
    check(std::ssize(long_ids) == f.num_long, "lab 06: the decoders finished (", run.steps.size(),
          " steps) before all ", f.num_long,
          " long prompts arrived; use a smaller --join-step or --long-every, or a larger --decode-len");
    // The decoders' latencies (the long prompts' own requests excluded).
    std::vector<double> tpot, itl, long_ttft;
    double stall = 0;
    for (const Request* r : run.requests) {
      if (std::ranges::find(long_ids, r->request_id) != long_ids.end()) {
        long_ttft.push_back(1e3 * RequestMetrics::from(r->times).ttft);
        continue;
      }
      const RequestMetrics m = RequestMetrics::from(r->times);
      tpot.push_back(m.tpot * 1e3);
      for (double gap : m.itl) itl.push_back(gap * 1e3), stall = std::max(stall, gap * 1e3);
    }
    int prefill_steps = 0;
    std::vector<double> ms;
    for (const StepStats& s : run.steps) {
      prefill_steps += s.num_prefill_tokens > 0 && &s != &run.steps.front();
      ms.push_back(1e3 * timed_work(s).second);
      samples.train.push_back(timed_work(s));
    }
    step_ms.push_back(ms);
    const std::string hash = run.tokens_hash();
    if (first_hash.empty()) first_hash = hash;
    check(hash == first_hash, "lab 06: ", budget_name(chunked, budget), " gave other tokens than no chunking (hash ",
          hash, " vs ", first_hash, ")");
    const Summary t = summarize(tpot), i = summarize(itl);
    hol.add_row({budget_name(chunked, budget), i.median, i.p99, stall, t.median, t.p99, summarize(long_ttft).median,
                 static_cast<long long>(prefill_steps), static_cast<long long>(run.steps.size()), hash});
    out.steps.columns.push_back({budget_name(chunked, budget) + " [ms]", 2});
  }
  std::size_t most_steps = 0;
  for (const auto& s : step_ms) most_steps = std::max(most_steps, s.size());
  for (std::size_t s = 0; s < most_steps; ++s) {
    std::vector<Cell> row = {static_cast<long long>(s)};
    for (const auto& run : step_ms) row.push_back(s < run.size() ? Cell{run[s]} : Cell{std::string("")});
    out.steps.add_row(row);
  }
  hol.note =
      "The decoders' latencies (the long prompts' own requests excluded). The prefill/decode article's 'TPOT p99' is "
      "the gap "
      "between two tokens of a request that is already answering: vLLM calls that ITL, and keeps TPOT for "
      "each request's mean gap. 'Longest stall' is the largest gap: the step that carried the most prompt. "
      "Every configuration gave the same tokens (same hash).";
  return out;
}

// 2. The budget sweep on a mixed workload, chunked: what each max_num_batched_tokens trades between TTFT
//    and TPOT. Returns the table and each budget's metrics, for the calibration table.
Table budget_sweep(Model& model, const LabConfig& base, const std::vector<WorkloadRequest>& workload,
                   const std::vector<int>& sweep, const SLO& slo, Progress& bar, StepSamples& samples,
                   std::vector<ServingMetrics>& real_sweep) {
  Table budget{.name = "budget_sweep",
               .title = "Token budget sweep, chunked prefill (" + std::to_string(workload.size()) + " requests)",
               .columns = {{"max_num_batched_tokens"},
                           {"TTFT p50 [ms]", 1},
                           {"TTFT p99 [ms]", 1},
                           {"TPOT p50 [ms]", 2},
                           {"TPOT p99 [ms]", 2},
                           {"ITL p99 [ms]", 2},
                           {"output tok/s", 1},
                           {"requests/s", 2},
                           {"goodput [req/s]", 2},
                           {"met SLO [%]", 1},
                           {"tokens hash"}}};
  for (std::size_t bi = 0; bi < sweep.size(); ++bi) {
    const int b = sweep[bi];
    Engine engine(model, lab_config(true, base, b).engine);
    const ServedRun run =
        serve_workload(engine, workload, [&](Engine&, const StepStats&, std::span<const RequestOutput> outputs) {
          bar.advance(static_cast<long>(outputs.size()));
        });
    // The first half of the budgets joins the fit; the rest is held out to test it.
    for (const StepStats& st : run.steps)
      (2 * bi < sweep.size() ? samples.train : samples.held_out).push_back(timed_work(st));
    const ServingMetrics m = summarize_requests(run.requests, slo);
    real_sweep.push_back(m);
    budget.add_row({static_cast<long long>(b), 1e3 * m.ttft.median, 1e3 * m.ttft.p99, 1e3 * m.tpot.median,
                    1e3 * m.tpot.p99, 1e3 * m.itl.p99, m.output_tokens_per_second, m.requests_per_second, m.goodput,
                    100.0 * m.num_meeting_slo / m.num_requests, run.tokens_hash()});
  }
  budget.note =
      "The prefill/decode article's guide: 512-2,048 for a stable TPOT p99, 4,096-8,192 for TTFT, 8,192 and up for "
      "prefill "
      "throughput (on a GPU). Every budget gives the same tokens.";
  return budget;
}

// 3. The cost model, fitted to the head-of-line steps and the sweep's first budgets, checked on the other
//    budgets (held out): how far the simulator that the GPU tables use is from this machine.
Table calibration(const Model& model, const LabConfig& base, const std::vector<WorkloadRequest>& workload,
                  const std::vector<int>& sweep, const SLO& slo, const StepSamples& samples,
                  const std::vector<ServingMetrics>& real_sweep) {
  ThreadPool pool(model.num_threads());
  const MeasuredRoofs roofs = measure_roofs(pool);
  const double peak = roofs.peak_flops(), bandwidth = roofs.bandwidth();
  const std::string busy =
      busy_machine_warning({roofs.flops, roofs.read});  // the roofs' own repeats: was the machine quiet?
  const CostModel here = CostModel::calibrate("this CPU (calibrated)", peak, bandwidth, samples.train);
  std::vector<double> step_error;
  for (const auto& [work, seconds] : samples.held_out)
    step_error.push_back(100.0 * std::abs(here.predict(work) - seconds) / seconds);
  const Summary err = summarize(step_error);
  Table calib{.name = "calibration",
              .title = "The simulator checked against this machine: the sweep replayed on the calibrated cost model",
              .columns = {{"max_num_batched_tokens"},
                          {"steps used for"},
                          {"TTFT p50 real [ms]", 1},
                          {"TTFT p50 simulated [ms]", 1},
                          {"TPOT p99 real [ms]", 2},
                          {"TPOT p99 simulated [ms]", 2},
                          {"TPOT p99 error [%]", 1}}};
  const SimulatedModel cpu_sim{model.config(), here, StepDtypes{model.options().weight_dtype, DType::F32, DType::F32}};
  for (std::size_t i = 0; i < sweep.size(); ++i) {
    const ServingMetrics m = simulate_serving(cpu_sim, lab_config(true, base, sweep[i]).engine, workload, slo);
    const ServingMetrics& r = real_sweep[i];
    calib.add_row({static_cast<long long>(sweep[i]), std::string(2 * i < sweep.size() ? "fit" : "held out"),
                   1e3 * r.ttft.median, 1e3 * m.ttft.median, 1e3 * r.tpot.p99, 1e3 * m.tpot.p99,
                   100.0 * (m.tpot.p99 - r.tpot.p99) / r.tpot.p99});
  }
  std::ostringstream cn;
  cn << std::fixed << std::setprecision(2) << "Cost model fitted to " << samples.train.size()
     << " steps (head-of-line runs and the sweep's first budgets): " << fitted_formula(here, peak, bandwidth)
     << ". On the " << samples.held_out.size() << " held-out steps (the other budgets) its error is "
     << std::setprecision(0) << err.median << "% at the median, " << err.p90 << "% at p90.";
  if (!busy.empty()) {
    cn << " Warning: " << busy << ".";
    std::cerr << "lab_06_chunked_prefill: warning: " << busy << "\n";
  }
  calib.note = cn.str();
  return calib;
}

}  // namespace servelab::lab06
