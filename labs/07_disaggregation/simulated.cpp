// SPDX-License-Identifier: MIT
/**
 * @file simulated.cpp
 * @brief Lab 07's simulated tables: (d) the simulator checked against the
 *        measured serving of (c), (e) colocated against xPyD fleets at
 *        Llama-3-8B/H100 scale.
 * @see labs/07_disaggregation/README.md
 */
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "lab07.h"

namespace servelab::lab07 {

using namespace servelab::lab;
using namespace servelab::disagg;

// (d) The simulator checked against (c): lab 06's cost model fitted to the colocated steps, then (c) replayed on
// simulated instances, 1P1D with the transfer rate measured in (b). Its error is what (e)'s numbers are worth.
SimulatorCheck simulator_check(const LabOptions& o, const ModelConfig& c, int threads, const RealServing& real,
                               const std::vector<Pattern>& patterns, double sm_write_bytes_per_second, const SLO& slo) {
  ThreadPool pool_colocated(2 * threads), pool_worker(threads);
  const MeasuredRoofs roofs2 = measure_roofs(pool_colocated), roofs1 = measure_roofs(pool_worker);
  const double peak2 = roofs2.peak_flops(), bandwidth2 = roofs2.bandwidth(), peak1 = roofs1.peak_flops(),
               bandwidth1 = roofs1.bandwidth();
  const StepDtypes here_dtypes{real.weight_dtype, DType::F32, DType::F32};
  const CostModel fitted = CostModel::calibrate("this CPU, " + std::to_string(2 * threads) + " threads (calibrated)",
                                                peak2, bandwidth2, real.steps);
  // A worker has fewer threads: its cost model is fitted to steps of the same workloads on a
  // model with a worker's threads, in this process (the workers' own steps stay in theirs).
  std::vector<std::pair<Work, double>> worker_steps;
  auto worker_model = load_model(
      [&] {
        LabOptions x = o;
        x.threads = threads;
        return x;
      }(),
      false);
  for (const std::vector<WorkloadRequest>& workload : real.workloads) {
    Engine engine(*worker_model, real.colocated_config);
    for (const WorkloadRequest& w : workload) engine.add_request(w.prompt_ids, {}, w.max_tokens);  // all at once
    serve_workload(engine, {}, [&](Engine&, const StepStats& s, auto) { worker_steps.push_back(timed_work(s)); });
  }
  const CostModel worker_cost = CostModel::calibrate("this CPU, " + std::to_string(threads) + " thread(s) (calibrated)",
                                                     peak1, bandwidth1, worker_steps);
  const SimulatedModel cpu_colocated{c, fitted, here_dtypes}, cpu_worker{c, worker_cost, here_dtypes};
  FleetConfig cpu_fleet;
  cpu_fleet.colocated = real.colocated_config;
  cpu_fleet.prefill.scheduler = {SchedulingPolicy::ONE_AT_A_TIME, 1, 8192, false, 0};  // the worker: one prompt, whole
  cpu_fleet.prefill.log = silent;
  cpu_fleet.decode.scheduler = {SchedulingPolicy::CONTINUOUS, 256, 8192, true, 0};  // every running request each step
  cpu_fleet.decode.log = silent;
  cpu_fleet.link_bytes_per_second = sm_write_bytes_per_second;
  cpu_fleet.transfer_overhead_s = std::max(0.0, summarize(real.control_seconds).median);
  cpu_fleet.kv_bytes_per_token = kv_bytes_per_token(c, 4);
  SimulatorCheck out;
  Table& calib = out.table;
  calib.name = "simulator_check";
  calib.title = "(d) The simulator checked against (c): the same workloads on simulated instances of this CPU";
  calib.columns = {"pattern",
                   "serving",
                   Column{"TTFT p50 real [ms]", 1},
                   Column{"TTFT p50 sim [ms]", 1},
                   "error [%]",
                   Column{"TPOT p50 real [ms]", 2},
                   Column{"TPOT p50 sim [ms]", 2},
                   "error [%]"};
  std::vector<double> abs_errors;
  for (std::size_t p = 0; p < patterns.size(); ++p)
    for (int split = 0; split < 2; ++split) {
      cpu_fleet.shape = split == 0 ? FleetShape{0, 1} : FleetShape{1, 1};
      const FleetRun run = simulate_fleet(split == 0 ? cpu_colocated : cpu_worker, cpu_fleet, real.workloads[p]);
      std::vector<const RequestTimes*> times;
      for (const RequestTimes& x : run.times) times.push_back(&x);
      const ServingMetrics m = summarize_times(times, slo);
      const RealRow& r = real.real[p][static_cast<std::size_t>(split)];
      const double ttft = r.ttft_p50.median, tpot = r.tpot_p50.median;
      const double e_ttft = 100 * (m.ttft.median - ttft) / ttft, e_tpot = 100 * (m.tpot.median - tpot) / tpot;
      abs_errors.insert(abs_errors.end(), {std::abs(e_ttft), std::abs(e_tpot)});
      calib.add_row({patterns[p].name, std::string(split == 0 ? "colocated" : "1P1D"), ttft * 1e3, m.ttft.median * 1e3,
                     e_ttft, tpot * 1e3, m.tpot.median * 1e3, e_tpot});
    }
  out.error = summarize(abs_errors);
  // A decode step of four requests at the longest prompt of (c): what half the threads cost a 1P1D decode worker.
  std::int64_t longest = 0;
  for (const std::vector<WorkloadRequest>& w : real.workloads)
    for (const WorkloadRequest& x : w)
      longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(x.prompt_ids.size()));
  const Work decode4 = step_work(c, here_dtypes, std::vector<SeqShape>(4, SeqShape{longest, 1}), 4);
  out.decode_step_colocated = fitted.predict(decode4);
  out.decode_step_worker = worker_cost.predict(decode4);
  std::ostringstream n;
  n << std::fixed << std::setprecision(2) << "Cost model fitted to the " << real.steps.size()
    << " colocated steps of (c): " << fitted_formula(fitted, peak2, bandwidth2) << "; workers: fitted to "
    << worker_steps.size() << " steps of the same workloads on " << threads << " thread(s), "
    << fitted_formula(worker_cost, peak1, bandwidth1, /*units=*/false) << "; the KV moves at (b)'s sm write rate, plus "
    << cpu_fleet.transfer_overhead_s * 1e3
    << " ms of control messages per request (the median over the warm-up requests of (c)). Calibration error (|error| "
       "over these rows): "
    << std::setprecision(0) << out.error.median << "% median, " << out.error.max << "% max.";
  calib.note = n.str();
  return out;
}

const FleetResult& PatternFleets::best() const {
  check(!fleets.empty(), "pattern ", pattern, ": no fleet ran");
  return *std::max_element(fleets.begin(), fleets.end(), [](const FleetResult& a, const FleetResult& b) {
    return a.goodput_per_gpu < b.goodput_per_gpu;
  });
}

std::vector<Pattern> gpu_patterns() {
  return {
      {"short prompt, short output", "continuous batching", LengthDist::uniform(128, 512), LengthDist::uniform(16, 64)},
      {"short prompt, long output", "chunked prefill", LengthDist::uniform(128, 512), LengthDist::uniform(512, 1024)},
      {"long prompt, short output", "disaggregated, more prefill", LengthDist::uniform(2048, 4096),
       LengthDist::uniform(16, 64)},
      {"long prompt, long output", "disaggregated, even split", LengthDist::uniform(2048, 4096),
       LengthDist::uniform(512, 1024)},
  };
}

FleetConfig gpu_fleet(const Flags& f, const SimulatedGpu& prefill_gpu, const SimulatedGpu& decode_gpu,
                      const Link& link) {
  FleetConfig fleet;
  fleet.colocated.scheduler = {SchedulingPolicy::CONTINUOUS, 256, f.sim_budget, true, 0};
  fleet.prefill.scheduler = {SchedulingPolicy::CONTINUOUS, 256, 8192, true,
                             0};  // prefill throughput (the prefill/decode article: 8,192+)
  fleet.decode.scheduler = {SchedulingPolicy::CONTINUOUS, 256, 8192, true, 0};
  fleet.colocated.kv_cache_memory = decode_gpu.kv_cache_memory;
  fleet.prefill.kv_cache_memory = prefill_gpu.kv_cache_memory;
  fleet.decode.kv_cache_memory = decode_gpu.kv_cache_memory;
  for (EngineConfig* e : {&fleet.colocated, &fleet.prefill, &fleet.decode}) e->log = silent;
  fleet.link_bytes_per_second = link.bytes_per_second;
  fleet.kv_bytes_per_token = kv_bytes_per_token(decode_gpu.model.config, 2);
  return fleet;
}

std::vector<WorkloadRequest> gpu_workload(const LabOptions& o, const Pattern& pattern, int num_requests,
                                          const std::string& arrivals, int vocab_size) {
  WorkloadSpec spec;
  spec.prompt_len = pattern.prompt;
  spec.output_len = pattern.output;
  spec.seed = o.seed;
  spec.num_requests = num_requests;
  spec.arrivals = parse_arrivals(arrivals, "--sim-load");
  return make_workload(spec, vocab_size);
}

ServingMetrics fleet_metrics(const FleetRun& run, const SLO& slo) {
  std::vector<const RequestTimes*> view;
  for (const RequestTimes& x : run.times) view.push_back(&x);
  return summarize_times(view, slo);
}

namespace {

// The factor on both of @p slo's limits that 90% of @p run's requests meet: DistServe's "SLO scale", read at
// one rate (a request's own factor is the larger of its TTFT and TPOT over their limits).
double slo_scale(const FleetRun& run, const SLO& slo) {
  std::vector<double> factors;
  for (const RequestTimes& t : run.times) {
    const double ttft = t.token_times.at(0) - t.arrival;
    const double tpot = t.token_times.size() > 1
                            ? (t.token_times.back() - t.token_times[0]) / static_cast<double>(t.token_times.size() - 1)
                            : 0.0;
    factors.push_back(std::max(ttft / slo.ttft, tpot / slo.tpot));
  }
  return percentile(factors, 90);
}

// The article's name for the kind of fleet @p shape with colocated instances chunking or not.
std::string strategy_of(const FleetShape& shape, bool chunked) {
  if (shape.num_prefill == 0) return chunked ? "chunked prefill" : "continuous batching";
  if (shape.num_prefill == shape.num_decode) return "disaggregated, even split";
  return shape.num_prefill > shape.num_decode ? "disaggregated, more prefill" : "disaggregated, more decode";
}

// One row of (e): a split, and whether its colocated instances chunk their prompts.
struct FleetKind {
  FleetShape shape;
  bool chunked = true;
  std::string describe() const {
    if (shape.num_prefill > 0) return shape.describe();
    return shape.describe() + (chunked ? ", chunked prefill" : ", continuous batching");
  }
};

// The claim that the strategy the article suggests for @p p gives the best goodput per GPU among (e)'s fleets.
Claim strategy_claim(const PatternFleets& p, const SLO& slo) {
  const FleetResult& best = p.best();
  const FleetResult* suggested = nullptr;
  for (const FleetResult& r : p.fleets)
    if (r.strategy == p.article_says && (!suggested || r.goodput_per_gpu > suggested->goodput_per_gpu)) suggested = &r;
  check(suggested != nullptr, "table (e) has no fleet of the kind '", p.article_says, "'");
  std::ostringstream evidence, cause;
  evidence << std::fixed << std::setprecision(2) << "best: " << best.fleet << " " << best.goodput_per_gpu
           << " req/s per GPU; best " << p.article_says << ": " << suggested->fleet << " " << suggested->goodput_per_gpu
           << " req/s per GPU (bisection resolution " << std::max(best.resolution, suggested->resolution) << ")";
  // A tie within the bisection's resolution is a tie: neither rate is known more finely.
  const bool held =
      suggested->goodput_per_gpu + std::max(best.resolution, suggested->resolution) >= best.goodput_per_gpu;
  // Which limit the suggested fleet came nearer at the fixed load says which pool gave out first.
  const bool tpot_nearer = suggested->tpot_p50 / slo.tpot >= suggested->ttft_p50 / slo.ttft;
  cause << std::fixed << std::setprecision(1) << "at the fixed load " << suggested->fleet << " had TTFT p50 "
        << suggested->ttft_p50 * 1e3 << " ms and TPOT p50 " << suggested->tpot_p50 * 1e3 << " ms against " << best.fleet
        << "'s " << best.ttft_p50 * 1e3 << " and " << best.tpot_p50 * 1e3 << " ms (SLO " << slo.ttft * 1e3 << " and "
        << slo.tpot * 1e3 << "): its "
        << (tpot_nearer ? "decode steps reach the TPOT limit" : "prompts reach the TTFT limit")
        << " at a lower rate per GPU"
        << (tpot_nearer && suggested->strategy.starts_with("disaggregated")
                ? ", because its decode pool carries every request's decode on fewer GPUs than the fleet has"
                : "");
  std::string id = "07.strategy_" + p.pattern;  // "07.strategy_long_prompt_short_output"
  std::replace(id.begin(), id.end(), ' ', '_');
  id.erase(std::remove(id.begin(), id.end(), ','), id.end());
  return {.id = id,
          .source = "the prefill/decode article, 'when to choose what' table",
          .statement = p.pattern + ": " + p.article_says + " serves the most requests per GPU (simulated)",
          .held = held,
          .evidence = evidence.str(),
          .cause = cause.str()};
}

}  // namespace

// (e) The prefill/decode article's strategy table at its scale, simulated: colocated (continuous batching, and
// chunked prefill) against xPyD on the same number of GPUs, each fleet's latencies at a fixed load and its goodput
// per GPU (DistServe's), so the strategy that pays shows per pattern; a claim per pattern checks the article's.
Fleets simulated_fleets(Report& report, const LabOptions& o, const Flags& f, const Link& gpu_link,
                        const Summary& calibration_error) {
  const SimulatedGpu instance = simulated_gpu(f.sim_model, f.sim_gpu, f.sim_overhead_ms, "--sim-model");
  const Hardware& hw = *instance.hardware;
  const SimulatedModel& gpu_sim = instance.model;
  const ModelConfig& g = gpu_sim.config;
  FleetConfig fleet = gpu_fleet(f, instance, instance, gpu_link);
  const EngineConfig chunked = fleet.colocated;
  EngineConfig whole = chunked;  // continuous batching: whole prompts, a budget that takes the longest
  whole.scheduler.enable_chunked_prefill = false;
  whole.scheduler.max_num_batched_tokens = 8192;
  const std::vector<Pattern> patterns = gpu_patterns();
  const std::vector<FleetKind> kinds = {{{0, 2}, false}, {{0, 2}, true}, {{1, 1}}, {{0, 3}, false},
                                        {{0, 3}, true},  {{2, 1}},       {{1, 2}}, {{0, 4}, false},
                                        {{0, 4}, true},  {{3, 1}}};
  const SLO gpu_slo{f.sim_slo_ttft_ms / 1e3, f.sim_slo_tpot_ms / 1e3};
  Fleets out;
  Table& sim = out.table;
  sim.name = "simulated_fleets";
  sim.title = "(e) Simulated: " + g.name + " (bf16), one " + hw.name + " per instance, KV over " + gpu_link.name +
              ", colocated vs xPyD";
  sim.columns = {"pattern",
                 "article suggests",
                 "fleet (simulated)",
                 "GPUs",
                 Column{"req/s offered", 2},
                 Column{"TTFT p50 [ms]", 1},
                 Column{"TTFT p99 [ms]", 1},
                 Column{"TPOT p50 [ms]", 2},
                 Column{"TPOT p99 [ms]", 2},
                 Column{"KV transfer p50 [ms]", 2},
                 "met SLO [%]",
                 Column{"goodput per GPU [req/s]", 3}};
  Progress sim_bar("simulated fleets", static_cast<long>(patterns.size() * kinds.size()));
  for (const Pattern& pattern : patterns) {
    PatternFleets& mine = out.patterns.emplace_back(PatternFleets{pattern.name, pattern.article_says, {}});
    // Serves @p kind with @p requests_per_gpu requests per GPU arriving as @p arrivals says.
    const auto serve = [&](const FleetKind& kind, int requests_per_gpu, const std::string& arrivals) {
      fleet.shape = kind.shape;
      fleet.colocated = kind.chunked ? chunked : whole;
      return simulate_fleet(
          gpu_sim, fleet,
          gpu_workload(o, pattern, requests_per_gpu * kind.shape.num_instances(), arrivals, g.vocab_size));
    };
    // Serves @p kind at @p per_gpu_rate requests/s per GPU, sim_requests per GPU.
    const auto serve_at = [&](const FleetKind& kind, double per_gpu_rate) {
      return serve(kind, f.sim_requests, "poisson:" + std::to_string(per_gpu_rate * kind.shape.num_instances()));
    };
    // The load: a fraction of what one colocated (chunked) GPU serves when every request is there at once.
    const double saturation = fleet_metrics(serve({{0, 1}, true}, f.sim_requests, "all"), gpu_slo).requests_per_second;
    for (const FleetKind& kind : kinds) {
      const FleetRun run = serve_at(kind, f.sim_load * saturation);
      const ServingMetrics m = fleet_metrics(run, gpu_slo);
      // DistServe's goodput: the highest rate per GPU at which 90% of requests meet the SLO, by bisection
      // below what this fleet serves with every request there at once (no higher rate is sustainable,
      // however short a run hides its queue).
      double lo = 0, hi = fleet_metrics(serve(kind, f.sim_requests, "all"), gpu_slo).requests_per_second /
                          kind.shape.num_instances();
      for (int i = 0; i < (o.quick ? 5 : 10); ++i) {  // --quick: within 3% of the saturation rate
        const double mid = (lo + hi) / 2;
        const ServingMetrics at = fleet_metrics(serve_at(kind, mid), gpu_slo);
        (at.num_meeting_slo >= 0.9 * at.num_requests ? lo : hi) = mid;
      }
      const Cell transfer =
          run.transfer_seconds.empty() ? Cell{std::string("—")} : Cell{summarize(run.transfer_seconds).median * 1e3};
      const int gpus = kind.shape.num_instances();
      sim.add_row({pattern.name, pattern.article_says, kind.describe(), static_cast<long long>(gpus),
                   f.sim_load * saturation * gpus, m.ttft.median * 1e3, m.ttft.p99 * 1e3, m.tpot.median * 1e3,
                   m.tpot.p99 * 1e3, transfer, 100.0 * m.num_meeting_slo / m.num_requests, lo});
      mine.fleets.push_back({kind.describe(), strategy_of(kind.shape, kind.chunked), gpus, lo, hi - lo,
                             slo_scale(run, gpu_slo), m.ttft.median, m.tpot.median});
      sim_bar.advance();
    }
  }
  std::ostringstream n;
  n << "Simulated, never measured: the engine's scheduler on " << gpu_sim.cost.label << " roofs plus "
    << f.sim_overhead_ms << " ms per step, calibrated on this CPU to " << std::fixed << std::setprecision(0)
    << calibration_error.median << "% median error (table d). Each fleet gets " << f.sim_requests
    << " requests per GPU, routed round robin; the latency columns at " << f.sim_load * 100
    << "% of one colocated GPU's saturation rate per GPU. SLO: TTFT <= " << f.sim_slo_ttft_ms
    << " ms, TPOT <= " << f.sim_slo_tpot_ms
    << " ms; goodput per GPU is DistServe's: the highest Poisson rate per GPU at which 90% of "
    << "requests meet both (bisection). Continuous batching: whole prompts, budget 8192; chunked prefill: budget "
    << f.sim_budget << "; prefill instances: budget 8192. Best goodput per GPU: ";
  for (std::size_t i = 0; i < out.patterns.size(); ++i)
    n << (i ? "; " : "") << out.patterns[i].pattern << ": " << out.patterns[i].best().fleet;
  n << ".";
  sim.note = n.str();
  report.add_table(sim);
  for (const PatternFleets& p : out.patterns) record_claim(report, strategy_claim(p, gpu_slo));
  return out;
}

}  // namespace servelab::lab07
