// SPDX-License-Identifier: MIT
/**
 * @file heterogeneous.cpp
 * @brief Lab 07's tables with the two pools on different GPUs, simulated:
 *        (f) the upgrade question (which pool's GPU moves TTFT, which
 *        TPOT), (g) the KV cache article's 8,000-token summarisation worked
 *        through, (h) DistServe's and Mooncake's headline numbers beside
 *        the closest reproduction in table (e).
 * @see labs/07_disaggregation/README.md
 */
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "lab07.h"

namespace servelab::lab07 {

using namespace servelab::lab;
using namespace servelab::disagg;

namespace {

// "x1.64" for a ratio.
std::string times(double ratio) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << "x" << ratio;
  return s.str();
}

// "12.34 ms" for seconds.
std::string ms(double seconds) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << seconds * 1e3 << " ms";
  return s.str();
}

// "TPOT p50: A100+A100 14.86 ms; decode on H100 9.99 ms (x1.49); prefill on H100 14.85 ms (x1.00)": a metric
// of the all-A100 1P1D against two upgrades of it, each with how many times faster it is.
std::string versus(const std::string& metric, double base, const std::string& a_name, double a,
                   const std::string& b_name, double b) {
  return metric + " p50: A100+A100 " + ms(base) + "; " + a_name + " " + ms(a) + " (" + times(base / a) + "); " +
         b_name + " " + ms(b) + " (" + times(base / b) + ")";
}

// "+75%" or "-4%" for a ratio of 1.75 or 0.96.
std::string percent(double ratio) {
  const long p = std::lround((ratio - 1) * 100);
  return (p >= 0 ? "+" : "") + std::to_string(p) + "%";
}

// TTFT and TPOT p50 of one fleet of (f), seconds.
struct Latency {
  double ttft = 0, tpot = 0;
};

}  // namespace

// (f) The upgrade question, simulated: 1P1D with the prefill and the decode pool each on an A100, H100 or H200,
// and colocated pairs of each; which side's upgrade moves TTFT and which TPOT, checked as claims.
Table gpu_upgrades(Report& report, const LabOptions& o, const Flags& f, const Link& gpu_link) {
  const std::vector<std::string> gpus = {"A100 80GB SXM", "H100 SXM", "H200 SXM"};
  std::vector<SimulatedGpu> sims;
  for (const std::string& name : gpus)
    sims.push_back(simulated_gpu(f.sim_model, name, f.sim_overhead_ms, "--sim-model"));
  const Pattern pattern = gpu_patterns().back();  // long prompts, long outputs: both phases heavy
  const SLO slo{f.sim_slo_ttft_ms / 1e3, f.sim_slo_tpot_ms / 1e3};
  const int vocab = sims[0].model.config.vocab_size;
  // Every fleet gets the same two-GPU workload: a fraction of what the all-A100 1P1D serves at saturation.
  FleetConfig fleet = gpu_fleet(f, sims[0], sims[0], gpu_link);
  fleet.shape = {1, 1};
  const double saturation =
      fleet_metrics(simulate_fleet(sims[0].model, fleet, gpu_workload(o, pattern, 2 * f.sim_requests, "all", vocab)),
                    slo)
          .requests_per_second;
  const std::vector<WorkloadRequest> workload =
      gpu_workload(o, pattern, 2 * f.sim_requests, "poisson:" + std::to_string(f.sim_load * saturation), vocab);

  Table t;
  t.name = "gpu_upgrades";
  t.title = "(f) Simulated: which pool's GPU moves TTFT and which TPOT (" + sims[0].model.config.name + ", " +
            pattern.name + ", KV over " + gpu_link.name + ")";
  t.columns = {"fleet (simulated)",        "prefill GPU",       "decode GPU",       Column{"TTFT p50 [ms]", 1},
               Column{"TPOT p50 [ms]", 2}, "TTFT vs A100+A100", "TPOT vs A100+A100"};
  std::vector<std::vector<Latency>> split(gpus.size(), std::vector<Latency>(gpus.size()));  // [prefill][decode]
  Latency base;
  const auto add = [&](const std::string& shape, std::size_t p, std::size_t d, const FleetRun& run) {
    const ServingMetrics m = fleet_metrics(run, slo);
    const Latency l{m.ttft.median, m.tpot.median};
    if (shape == "1P1D" && p == 0 && d == 0) base = l;
    t.add_row(
        {shape, gpus[p], gpus[d], l.ttft * 1e3, l.tpot * 1e3, times(base.ttft / l.ttft), times(base.tpot / l.tpot)});
    return l;
  };
  for (std::size_t p = 0; p < gpus.size(); ++p)
    for (std::size_t d = 0; d < gpus.size(); ++d) {
      FleetConfig hetero = gpu_fleet(f, sims[p], sims[d], gpu_link);
      hetero.shape = {1, 1};
      split[p][d] = add("1P1D", p, d, simulate_fleet(sims[p].model, sims[d].model, hetero, workload));
    }
  std::vector<Latency> colocated;
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    FleetConfig same = gpu_fleet(f, sims[g], sims[g], gpu_link);
    same.shape = {0, 2};
    colocated.push_back(add("colocated x2, chunked prefill", g, g, simulate_fleet(sims[g].model, same, workload)));
  }
  // One step of each phase on each GPU, as lab 03's GPU table times them: a 3,072-token prefill, and a decode
  // step of 32 requests at 3,072 tokens of context.
  const ModelConfig& m = sims[0].model.config;
  const StepDtypes& dt = sims[0].model.dtypes;
  const Work prefill_step = step_work(m, dt, {{0, 3072}}, 1),
             decode_step = step_work(m, dt, std::vector<SeqShape>(32, SeqShape{3072, 1}), 32);
  const auto step_speedup = [&](const Work& w, std::size_t from, std::size_t to) {
    return sims[from].model.cost.predict(w) / sims[to].model.cost.predict(w);
  };
  const double prefill_a_to_h = step_speedup(prefill_step, 0, 1), decode_a_to_h = step_speedup(decode_step, 0, 1);
  std::ostringstream n;
  n << std::fixed << std::setprecision(2)
    << "Simulated, never measured: datasheet roofs (A100 312 TFLOP/s, 2,039 GB/s; "
    << "H100 989, 3,350; H200 989, 4,800) plus " << f.sim_overhead_ms << " ms per step; " << workload.size()
    << " requests at " << f.sim_load * saturation << " req/s (" << f.sim_load * 100
    << "% of the all-A100 1P1D's saturation) on every fleet. The first token comes with the KV, so TTFT is the "
    << "prefill GPU's and the link's; every later token is a decode step, so TPOT is the decode GPU's. One step "
    << "alone (lab 03's view): A100 -> H100 makes a 3,072-token prefill " << times(prefill_a_to_h)
    << " faster (FLOP/s x3.17) and a 32-request decode step " << times(decode_a_to_h)
    << " faster (bandwidth x1.64, the 4 ms overhead dilutes both). 'vs A100+A100': how many times faster "
       "than the all-A100 1P1D.";
  t.note = n.str();
  report.add_table(t);

  const Latency &aa = split[0][0], &ha = split[1][0], &ah = split[0][1], &hh2 = split[1][2], &h2h = split[2][1],
                &hh = split[1][1];
  const double tpot_by_decode = aa.tpot / ah.tpot, tpot_by_prefill = aa.tpot / ha.tpot;
  const double ttft_by_prefill = aa.ttft / ha.ttft, ttft_by_decode = aa.ttft / ah.ttft;
  const double bandwidth_tpot = hh.tpot / hh2.tpot, bandwidth_ttft = hh.ttft / h2h.ttft;
  const std::vector<Claim> claims = {
      {"07.upgrade_decode_moves_tpot", "the prefill/decode article, 'find the bottleneck first'",
       "replacing the decode pool's A100 with an H100 improves TPOT far more directly than replacing the prefill "
       "pool's (simulated)",
       tpot_by_decode > 1.1 && tpot_by_decode > 1.05 * tpot_by_prefill,
       versus("TPOT", aa.tpot, "decode on H100", ah.tpot, "prefill on H100", ha.tpot),
       "the decode GPU's faster steps did not move TPOT more than the prefill GPU did"},
      {"07.upgrade_prefill_moves_ttft", "this lab",
       "in a split fleet the prefill pool's GPU moves TTFT and the decode pool's does not (simulated)",
       ttft_by_prefill > 1.1 && std::abs(ttft_by_decode - 1) < 0.05,
       versus("TTFT", aa.ttft, "prefill on H100", ha.ttft, "decode on H100", ah.ttft),
       "TTFT moved with the decode GPU too, or not with the prefill GPU"},
      {"07.bandwidth_upgrade_helps_decode_only",
       "the KV cache article, section 5-4 (decode wants memory bandwidth, prefill FLOP/s)",
       "more memory bandwidth at the same FLOP/s (H100 -> H200) shortens TPOT on the decode side and leaves TTFT "
       "within 5% on the prefill side (simulated)",
       bandwidth_tpot > 1.05 && std::abs(bandwidth_ttft - 1) < 0.05,
       "from H100+H100 (TPOT " + ms(hh.tpot) + ", TTFT " + ms(hh.ttft) + "): decode on H200, TPOT " + ms(hh2.tpot) +
           " (" + times(bandwidth_tpot) + "); prefill on H200, TTFT " + ms(h2h.ttft) + " (" + times(bandwidth_ttft) +
           ")",
       "a long prefill is not compute-bound on the H100 here, or a decode step not bandwidth-bound"},
      {"07.agrees_with_lab03", "this lab, lab 03's GPU table",
       "A100 -> H100 speeds one prefill step more than one decode step (as lab 03's table shows), yet only the "
       "decode pool's upgrade moves a split fleet's TPOT: a step's speedup reaches the metric its own pool sets",
       prefill_a_to_h > decode_a_to_h && tpot_by_decode > tpot_by_prefill,
       "one step A100 -> H100: prefill " + times(prefill_a_to_h) + ", decode " + times(decode_a_to_h) +
           "; colocated x2 A100 -> H100: TTFT " + times(colocated[0].ttft / colocated[1].ttft) + ", TPOT " +
           times(colocated[0].tpot / colocated[1].tpot) + "; 1P1D decode-side upgrade: TPOT " + times(tpot_by_decode),
       "on these roofs a decode step sped up at least as much as a prefill step"},
  };
  for (const Claim& c : claims) record_claim(report, c);
  return t;
}

// (g) The KV cache article's 8,000-token summarisation (§5-4) worked through: prefill on --sim-gpu, the KV's
// bytes and its time over each named link, decode on --sim-decode-gpu alone and batched; the premise as a claim.
Table summarisation_walkthrough(Report& report, const Flags& f) {
  constexpr int kPrompt = 8000, kSummary = 256, kBatch = 32;
  const SimulatedGpu prefill = simulated_gpu(f.sim_model, f.sim_gpu, f.sim_overhead_ms, "--sim-model"),
                     decode = simulated_gpu(f.sim_model, f.sim_decode_gpu, f.sim_overhead_ms, "--sim-model");
  const SimulatedModel& pm = prefill.model;
  const ModelConfig& m = pm.config;
  Table t;
  t.name = "summarisation_walkthrough";
  t.title = "(g) The KV cache article's 8,000-token summarisation, step by step (" + m.name +
            ", bf16, simulated roofs plus " + plain_number(f.sim_overhead_ms) + " ms per step)";
  t.columns = {"step", "on", Column{"GFLOP", 1}, "bytes", Column{"time [ms]", 2}};
  const Cell none = std::string("—");
  const Work prefill_work = step_work(m, pm.dtypes, {{0, kPrompt}}, 1);
  const double prefill_s = pm.cost.predict(prefill_work);
  t.add_row({std::string("2. prefill 8,000 tokens, one step"), prefill.hardware->name, prefill_work.flops / 1e9,
             human_bytes(prefill_work.bytes()), prefill_s * 1e3});
  const double kv = kv_bytes_per_token(m, 2) * kPrompt;
  double hdr_s = 0;
  for (const Link& l : named_links())
    if (l.bytes_per_second > 0) {
      t.add_row(
          {std::string("3. KV to the decode server"), l.name, none, human_bytes(kv), kv / l.bytes_per_second * 1e3});
      if (l.name == f.sim_link) hdr_s = kv / l.bytes_per_second;
    }
  const double fit = static_cast<double>(decode.kv_cache_memory) / kv;
  const auto decode_step = [&](const SimulatedGpu& g, int batch) {
    const Work w = step_work(m, g.model.dtypes,
                             std::vector<SeqShape>(static_cast<std::size_t>(batch), SeqShape{kPrompt, 1}), batch);
    return std::pair{w, g.model.cost.predict(w)};
  };
  const auto [alone_work, alone_s] = decode_step(decode, 1);
  const auto [batch_work, batch_s] = decode_step(decode, kBatch);
  const auto [batch_prefill_gpu_work, batch_prefill_gpu_s] = decode_step(prefill, kBatch);
  t.add_row({std::string("4. decode step, this request alone"), decode.hardware->name, alone_work.flops / 1e9,
             human_bytes(alone_work.bytes()), alone_s * 1e3});
  t.add_row({std::string("4. decode step, batched with 31 like it"), decode.hardware->name, batch_work.flops / 1e9,
             human_bytes(batch_work.bytes()), batch_s * 1e3});
  t.add_row({std::string("4. the same batch on the prefill GPU"), prefill.hardware->name,
             batch_prefill_gpu_work.flops / 1e9, human_bytes(batch_prefill_gpu_work.bytes()),
             batch_prefill_gpu_s * 1e3});
  const double total = prefill_s + hdr_s + (kSummary - 1) * batch_s;
  t.add_row({std::string("5. 256-token summary streamed: prefill + KV over " + f.sim_link + " + 255 batched steps"),
             prefill.hardware->name + " -> " + decode.hardware->name, none, none, total * 1e3});
  std::ostringstream n;
  n << std::fixed << std::setprecision(0) << "Simulated, never measured. Step numbers are the article's. The "
    << decode.hardware->name << " holds " << std::floor(fit) << " such requests' KV (" << human_bytes(kv)
    << " each, in " << human_bytes(static_cast<double>(decode.kv_cache_memory))
    << " left for KV); one H100 instead of the article's tensor-parallel group (which divides the prefill by its "
       "degree, less its all-reduces). The 256-token summary and the batch of 32 are this lab's choices.";
  t.note = n.str();
  report.add_table(t);
  std::ostringstream e;
  e << std::fixed << std::setprecision(1) << "prefill of 8,000 tokens on " << prefill.hardware->name << " "
    << prefill_s * 1e3 << " ms; its KV (" << human_bytes(kv) << ") over " << f.sim_link << " " << hdr_s * 1e3 << " ms";
  record_claim(report, {.id = "07.walkthrough_transfer_below_prefill",
                        .source = "the KV cache article, section 5-4; the prefill/decode article's premise",
                        .statement = "for an 8,000-token prompt, moving its KV over one " + f.sim_link +
                                     " link takes less time than its prefill (simulated)",
                        .held = hdr_s < prefill_s,
                        .evidence = e.str(),
                        .cause = "the link's rate is below the KV bytes a prefill GPU makes per second"});
  return t;
}

// (h) DistServe's and Mooncake's headline numbers with their conditions, beside the closest reproduction in (e).
Table paper_numbers(const Fleets& fleets, const Flags& f) {
  // Over (e)'s patterns: the best disaggregated fleet's gain in goodput per GPU over the best colocated one; over
  // the best colocated fleet of as many GPUs, its gain in goodput and its SLO scale at the fixed load.
  struct Gain {
    std::string pattern{}, fleets{}, same_size_fleets{}, slo_fleets{};
    double goodput = 0, same_size_goodput = 0, slo = 0;
  };
  std::vector<Gain> gains;
  for (const PatternFleets& p : fleets.patterns) {
    const FleetResult *split = nullptr, *together = nullptr;
    for (const FleetResult& r : p.fleets) {
      const bool disaggregated = r.strategy.starts_with("disaggregated");
      const FleetResult*& best = disaggregated ? split : together;
      if (!best || r.goodput_per_gpu > best->goodput_per_gpu) best = &r;
    }
    Gain g{.pattern = p.pattern,
           .fleets = split->fleet + " vs " + together->fleet,
           .goodput = split->goodput_per_gpu / together->goodput_per_gpu};
    const FleetResult *tightest = nullptr, *most = nullptr;  // colocated fleets of split's size
    for (const FleetResult& r : p.fleets)
      if (!r.strategy.starts_with("disaggregated") && r.gpus == split->gpus) {
        if (!tightest || r.slo_scale < tightest->slo_scale) tightest = &r;
        if (!most || r.goodput_per_gpu > most->goodput_per_gpu) most = &r;
      }
    check(tightest && most, "table (e) has no colocated fleet of ", split->gpus, " GPUs");
    g.slo = tightest->slo_scale / split->slo_scale;
    g.slo_fleets = split->fleet + " vs " + tightest->fleet;
    g.same_size_goodput = split->goodput_per_gpu / most->goodput_per_gpu;
    g.same_size_fleets = split->fleet + " vs " + most->fleet;
    gains.push_back(g);
  }
  const auto best_by = [&](auto key) {
    return *std::max_element(gains.begin(), gains.end(), [&](const Gain& a, const Gain& b) { return key(a) < key(b); });
  };
  const Gain most = best_by([](const Gain&g) { return g.goodput; }),
             tightest = best_by([](const Gain&g) { return g.slo; });
  const Gain& long_short = gains.at(2);  // long prompts, short outputs: the closest to Kimi's long-context traffic
  Table t;
  t.name = "paper_numbers";
  t.title = "(h) The papers' headline numbers beside this simulator's closest reproduction (simulated)";
  t.columns = {"paper", "claim", "paper's conditions", "simulated here", "here: pattern, fleets"};
  t.add_row({std::string("DistServe (OSDI 2024)"), std::string("7.4x more requests within SLO"),
             std::string("OPT-13B to 175B on A100-80GB nodes; chatbot, code completion and summarisation traces; "
                         "vs vLLM; parallelism and placement searched per phase"),
             times(most.goodput) + " goodput per GPU", most.pattern + ": " + most.fleets});
  t.add_row({std::string("DistServe (OSDI 2024)"), std::string("12.6x tighter SLO at the same rate"),
             std::string("as above; the SLO scale at which 90% of requests still meet both limits"),
             times(tightest.slo) + " smaller SLO scale", tightest.pattern + ": " + tightest.slo_fleets});
  t.add_row({std::string("Mooncake (arXiv 2407.00079)"), std::string("+75% requests on the same GPUs"),
             std::string("Kimi's production traffic (long contexts), KVCache-centric scheduling with prefix reuse "
                         "and a CPU/SSD KV pool"),
             percent(long_short.same_size_goodput) + " goodput",
             long_short.pattern + ": " + long_short.same_size_fleets});
  t.add_row({std::string("Mooncake (arXiv 2407.00079)"), std::string("up to +525% throughput"),
             std::string("simulated long-context scenarios under SLOs, vs vLLM"), percent(most.goodput) + " at most",
             most.pattern + ": " + most.fleets});
  t.note = "Simulated, never measured: " + f.sim_model + " on " + f.sim_gpu +
           " roofs, one GPU per instance, the fleets and SLO of table (e). The papers' conditions are from their "
           "abstracts and evaluations; the differences are explained in the chapter.";
  return t;
}

}  // namespace servelab::lab07
