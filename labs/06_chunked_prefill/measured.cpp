// SPDX-License-Identifier: MIT
/**
 * @file measured.cpp
 * @brief Lab 06's measured tables: (0) the KV cache article's 1,000-token
 *        split and its K/V bytes, (1) head-of-line blocking with and without
 *        chunks, (2) the token budget sweep, (3) the cost model fitted to
 *        their steps and checked on held-out ones.
 * @see labs/06_chunked_prefill/README.md
 */
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kv/kv_cache.h"
#include "lab06.h"
#include "workload/synthetic_prompt.h"

namespace servelab::lab06 {

StepCostLine fit_step_cost(const std::vector<std::pair<int, double>>& steps) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::set<int> sizes;
  for (const auto& [tokens, seconds] : steps) {
    n += 1, sx += tokens, sy += seconds, sxx += double(tokens) * tokens, sxy += tokens * seconds;
    sizes.insert(tokens);
  }
  check(sizes.size() >= 2, "lab 06: a step cost line needs steps of at least two sizes, got ", sizes.size());
  const double per_token = (n * sxy - sx * sy) / (n * sxx - sx * sx), fixed = (sy - per_token * sx) / n;
  // A negative intercept (steps that grow faster than linearly, e.g. attention over long chunks) is no fixed
  // cost: the best line with fixed >= 0 then goes through the origin.
  if (fixed < 0) return {.fixed = 0, .per_token = sxy / sxx};
  return {.fixed = fixed, .per_token = per_token};
}

// 0. The KV cache article's walk-through on this engine's scheduler: a 1,000-token prompt beside 4 decodes with
//    a budget of 512 and 256-token chunks, on the simulated clock (the same scheduling decisions as a real run).
ArticleSplit article_split(Report& report, const GpuScale& g) {
  constexpr int prompt_len = 1000, budget = 512, threshold = 256, decoders = 4;
  LabConfig at = g.base;
  at.engine.scheduler.long_prefill_token_threshold = threshold;
  const LabConfig config = lab_config(true, at, budget);
  record_configuration(report, "the article's split", 6, with_budget(at, budget), config);
  const ModelConfig& c = g.gpu.model.config;
  ArticleSplit out{.table = {.name = "article_split",
                             .title = "The KV cache article's 1,000-token prompt, scheduled by this engine: budget "
                                      "512, --long-prefill-token-threshold 256, beside 4 decodes (" +
                                      g.what() + ")",
                             .columns = {"step", "decodes", "prompt chunk", "num_computed_tokens",
                                         "first token sampled", Column{"K/V held [MiB]", 1}}}};
  Engine engine(g.gpu.model, config.engine);
  for (int d = 0; d < decoders; ++d) engine.add_request(synthetic_prompt(32, c.vocab_size, 100 + d), {}, 8);
  engine.step();  // the decoders' own prompts: from here on they decode, one token a step
  const int id = engine.add_request(synthetic_prompt(prompt_len, c.vocab_size, 11), {}, 2);
  const double per_token = static_cast<double>(kv_bytes_per_token(c, g.gpu.model.dtypes.kv));
  for (int step = 1; engine.request(id).num_output_tokens() == 0; ++step) {
    check(step <= prompt_len, "lab 06: the article's prompt was never prefilled");
    const int before = engine.request(id).num_computed_tokens;
    engine.step();
    const Request& r = engine.request(id);
    out.chunks.push_back(r.num_computed_tokens - before);
    out.table.add_row({static_cast<long long>(step), static_cast<long long>(engine.last_step().num_decode_tokens),
                       static_cast<long long>(out.chunks.back()),
                       std::to_string(before) + " -> " + std::to_string(r.num_computed_tokens),
                       std::string(r.num_output_tokens() > 0 ? "yes" : "no"),
                       per_token * r.num_computed_tokens / (1 << 20)});
  }
  out.table.note =
      "Each chunk appends its tokens' K/V to the request's blocks; the last chunk samples the first "
      "token. Chunk 2 attends to chunk 1's K/V from the cache, so after chunk 4 the cache holds the K/V "
      "of a one-shot prefill: the head-of-line table below checks that on this machine's model, byte "
      "for byte.";
  return out;
}

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
                .columns = {"configuration", Column{"ITL p50 [ms]", 2}, Column{"ITL p99 [ms]", 2},
                            Column{"longest stall [ms]", 1}, Column{"TPOT p50 [ms]", 2}, Column{"TPOT p99 [ms]", 2},
                            Column{"long prompts' TTFT p50 [ms]", 1}, "steps with prefill", "steps",
                            "long prompts' K/V", "tokens hash"}},
      .steps = {
          .name = "head_of_line_steps", .title = "Step time around the long prompt's arrival", .columns = {"step"}}};
  Table& hol = out.table;
  std::vector<std::vector<double>> step_ms;
  std::string first_hash;
  std::vector<std::byte> first_kv;
  out.kv_equal = true;
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
    // Each long prompt's K/V, read from the engine's cache in the step that samples its first token: the
    // blocks the prompt fills completely (a partly filled last block would hold the next tokens too).
    std::vector<std::byte> kv;
    const auto read_kv = [&](std::span<const RequestOutput> outputs) {
      for (const RequestOutput& o : outputs) {
        if (std::ranges::find(long_ids, o.request_id) == long_ids.end() ||
            engine.request(o.request_id).num_output_tokens() != 1)
          continue;
        const auto& ids = engine.kv_cache_manager().block_table(o.request_id).block_ids();
        const std::span full(ids.data(), static_cast<std::size_t>(f.long_prompt / config.engine.block_size));
        const std::size_t at = kv.size();
        kv.resize(at + full.size() * engine.kv_cache().bytes_per_block());
        engine.kv_cache().export_blocks(full, std::span(kv).subspan(at));
      }
    };
    const ServedRun run =
        serve_workload(engine, {}, [&](Engine&, const StepStats&, std::span<const RequestOutput> outputs) {
          bar.advance(static_cast<long>(outputs.size()));
          read_kv(outputs);
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
    const bool reference = first_kv.empty();
    if (reference) first_kv = kv;
    const bool same_kv = kv.size() == first_kv.size() && std::memcmp(kv.data(), first_kv.data(), kv.size()) == 0;
    out.kv_equal = out.kv_equal && same_kv;
    out.kv_bytes = kv.size();
    const Summary t = summarize(tpot), i = summarize(itl);
    hol.add_row({budget_name(chunked, budget), i.median, i.p99, stall, t.median, t.p99, summarize(long_ttft).median,
                 static_cast<long long>(prefill_steps), static_cast<long long>(run.steps.size()),
                 std::string(reference ? "reference"
                             : same_kv ? "identical"
                                       : "differs"),
                 hash});
    out.steps.columns.push_back({budget_name(chunked, budget) + " [ms]", 2});
  }
  std::size_t most_steps = 0;
  for (const auto& s : step_ms) most_steps = std::max(most_steps, s.size());
  for (std::size_t s = 0; s < most_steps; ++s) {
    std::vector<Cell> row = {static_cast<long long>(s)};
    for (const auto& run : step_ms) row.push_back(s < run.size() ? Cell{run[s]} : Cell{std::string("")});
    out.steps.add_row(row);
  }
  hol.note = "The decoders' latencies (the long prompts' own requests excluded). " + latency_note() +
             " 'Longest stall' is the largest gap: the step that carried the most prompt. Every configuration gave "
             "the same tokens (same hash). The long prompts' K/V (" +
             std::to_string(out.kv_bytes) +
             " bytes: their full blocks, read from the engine's cache when each "
             "samples its first token) compared byte for byte with no chunking's.";
  return out;
}

// 2. The budget sweep on a mixed workload, chunked: what each max_num_batched_tokens trades between TTFT
//    and the token gaps, judged by @p slo.
BudgetSweep budget_sweep(Model& model, const LabConfig& base, const std::vector<WorkloadRequest>& workload,
                         const std::vector<int>& sweep, const LatencySLO& slo, Progress& bar, StepSamples& samples) {
  BudgetSweep out{.table = {.name = "budget_sweep",
                            .title = "Token budget sweep, chunked prefill, real on this machine (" +
                                     std::to_string(workload.size()) + " requests; SLO " + slo.describe() + ")",
                            .columns = latency_columns("max_num_batched_tokens")}};
  out.table.columns.push_back({"tokens hash"});
  for (std::size_t bi = 0; bi < sweep.size(); ++bi) {
    const int b = sweep[bi];
    Engine engine(model, lab_config(true, base, b).engine);
    const ServedRun run =
        serve_workload(engine, workload, [&](Engine&, const StepStats&, std::span<const RequestOutput> outputs) {
          bar.advance(static_cast<long>(outputs.size()));
        });
    // The first half of the budgets joins the fit; the rest is held out to test it.
    for (const StepStats& st : run.steps) {
      (2 * bi < sweep.size() ? samples.train : samples.held_out).push_back(timed_work(st));
      if (st.num_scheduled_tokens > 0) out.steps.push_back({st.num_scheduled_tokens, timed_work(st).second});
    }
    out.runs.push_back(run_latency(run.requests, slo));
    std::vector<Cell> row = latency_row(static_cast<long long>(b), out.runs.back());
    row.push_back(run.tokens_hash());
    out.table.add_row(row);
  }
  const StepCostLine line = fit_step_cost(out.steps);
  std::ostringstream note;
  note << std::fixed << std::setprecision(2) << latency_note()
       << " The prefill/decode article's guide (for GPUs): 512-2,048 for a stable TPOT p99, 4,096-8,192 for "
          "TTFT, 8,192 and up for prefill throughput. Every budget gives the same tokens. A step here costs "
       << 1e3 * line.fixed << " ms + " << 1e6 * line.per_token << " us per token (least squares over "
       << out.steps.size() << " steps): the fixed part is " << std::setprecision(0) << 100 * line.fixed_share(512)
       << "% of a 512-token step.";
  out.table.note = note.str();
  return out;
}

// 3. The cost model, fitted to the head-of-line steps and the sweep's first budgets, checked on the other
//    budgets (held out): how far the simulator that the GPU tables use is from this machine.
Table calibration(const Model& model, const LabConfig& base, const std::vector<WorkloadRequest>& workload,
                  const std::vector<int>& sweep, const LatencySLO& slo, const StepSamples& samples,
                  const BudgetSweep& real) {
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
              .columns = {"max_num_batched_tokens", "steps used for", Column{"TTFT p50 real [ms]", 1},
                          Column{"TTFT p50 simulated [ms]", 1}, Column{"ITL p99 real [ms]", 2},
                          Column{"ITL p99 simulated [ms]", 2}, Column{"ITL p99 error [%]", 1}}};
  const SimulatedModel cpu_sim{model.config(), here, StepDtypes{model.options().weight_dtype, DType::F32, DType::F32}};
  for (std::size_t i = 0; i < sweep.size(); ++i) {
    const ServingMetrics m = simulate_serving(cpu_sim, lab_config(true, base, sweep[i]).engine, workload, slo).m;
    const ServingMetrics& r = real.runs[i].m;
    calib.add_row({static_cast<long long>(sweep[i]), std::string(2 * i < sweep.size() ? "fit" : "held out"),
                   1e3 * r.ttft.median, 1e3 * m.ttft.median, 1e3 * r.itl.p99, 1e3 * m.itl.p99,
                   100.0 * (m.itl.p99 - r.itl.p99) / r.itl.p99});
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
