// SPDX-License-Identifier: MIT
/**
 * @file main.cpp
 * @brief Lab 07 — disaggregated prefill and decode: separate worker
 *        processes, the KV moved between them over UCX, requests routed over
 *        ZeroMQ, against lab 06's colocated engine.
 *
 * Tables: (a) the KV bytes a request moves for the real presets, how long
 * that takes on each named link and how long its prefill takes on a GPU's
 * roofline (computed); (b) transfers measured here, between real processes,
 * by mode, UCX transport and streaming, with the link emulation's error;
 * (c) the same workload served colocated (lab 06) and disaggregated 1P1D,
 * repeated, TTFT/TPOT and goodput under an SLO; (d) (c) replayed on the
 * simulator, its calibration error; (e) simulated at Llama-3-8B/H100 scale,
 * continuous batching and chunked prefill against several P:D splits; (f)
 * prefill and decode pools on different GPUs; (g) the 8,000-token
 * summarisation worked through; (h) the papers' numbers beside (e)'s. Then
 * the claims each checked on these numbers, and the verdict.
 * @see labs/07_disaggregation/README.md
 */
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "config/model_config.h"
#include "core/error.h"
#include "disagg/link.h"
#include "lab.h"
#include "lab07.h"
#include "perf/cost_model.h"
#include "perf/hardware.h"

using namespace servelab::lab07;
using namespace servelab::disagg;

namespace {

// Adds --name, bound to @p value, showing its default.
template <typename T>
CLI::Option* shown(CLI::App& app, const std::string& name, T& value, const std::string& help) {
  return app.add_option(name, value, help)->capture_default_str();
}

// Adds --name, bound to @p value and refused outside [lo, hi], showing its default.
template <typename T>
void ranged(CLI::App& app, const std::string& name, T& value, const std::string& help, double lo, double hi) {
  shown(app, name, value, help)->check(CLI::Range(lo, hi));
}

// Lab 07's flags on @p app, over the defaults in @p f.
void add_flags(CLI::App& app, Flags& f) {
  shown(app, "--servelab", f.exe, "the servelab executable that runs the router and workers");
  ranged(app, "--prompt-len", f.prompt_len, "prompt tokens of the measured transfers", 1, 8192);
  ranged(app, "--requests", f.num_requests, "requests of the serving comparison", 1, 10000);
  ranged(app, "--serving-repeats", f.serving_repeats, "runs of each pattern in the serving comparison (1 with --quick)",
         1, 100);
  ranged(app, "--rate", f.rate, "Poisson arrival rate of the serving comparison, requests/s", 0.01, 1e4);
  ranged(app, "--slo-ttft-ms", f.slo_ttft_ms, "goodput's TTFT limit", 1e-3, 1e7);
  ranged(app, "--slo-tpot-ms", f.slo_tpot_ms, "goodput's TPOT limit", 1e-3, 1e7);
  shown(app, "--sim-model", f.sim_model, "simulated rows: model preset");
  shown(app, "--sim-gpu", f.sim_gpu,
        "simulated rows: hardware datasheet entry (perf/hardware.h), one per instance; the prefill GPU of (g)");
  shown(app, "--sim-decode-gpu", f.sim_decode_gpu, "simulated walk-through (g): the decode server's GPU");
  shown(app, "--sim-link", f.sim_link, "simulated rows: the link each prefill instance sends KV over");
  ranged(app, "--sim-requests", f.sim_requests, "simulated rows: requests per GPU", 1, 100000);
  ranged(app, "--sim-budget", f.sim_budget, "simulated rows: colocated instances' max_num_batched_tokens (chunked)", 1,
         1 << 20);
  ranged(app, "--sim-load", f.sim_load,
         "simulated rows: offered load per GPU, a fraction of one colocated GPU's saturation throughput", 0.01, 10.0);
  ranged(app, "--sim-overhead-ms", f.sim_overhead_ms, "simulated rows: fixed cost per step, ms", 0.0, 1e4);
  ranged(app, "--sim-slo-ttft-ms", f.sim_slo_ttft_ms, "simulated rows: goodput's TTFT limit", 1e-3, 1e7);
  ranged(app, "--sim-slo-tpot-ms", f.sim_slo_tpot_ms, "simulated rows: goodput's TPOT limit", 1e-3, 1e7);
}

// A prompt's KV and how long it takes to make and to move: the prefill on a datasheet roofline (no overhead, as
// the links run at line rate) and the KV over each named link.
struct KvCost {
  double bytes = 0, prefill_s = 0;
  std::vector<double> link_s{};  ///< per named link with a rate, in named_links() order
};

KvCost kv_cost(const ModelConfig& model, const CostModel& gpu_roofs, int tokens) {
  KvCost out;
  out.bytes = kv_bytes_per_token(model, 2) * tokens;
  out.prefill_s = gpu_roofs.predict(step_work(model, {DType::BF16, DType::BF16, DType::BF16}, {{0, tokens}}, 1));
  for (const Link& l : named_links())
    if (l.bytes_per_second > 0) out.link_s.push_back(out.bytes / l.bytes_per_second);
  return out;
}

// Each named link's "<name> [ms]" column.
std::vector<Column> link_columns() {
  std::vector<Column> out;
  for (const Link& l : named_links())
    if (l.bytes_per_second > 0) out.push_back({l.name + " [ms]", 2});
  return out;
}

// (a) What moves, computed: 2 * layers * kv_heads * head_dim * tokens * 2 bytes (bf16), how long each named link
// takes for it, and how long its prefill takes on --sim-gpu's roofline: the size of the problem disaggregation has
// to solve, before anything is measured.
Table kv_bytes_table(const Flags& f) {
  const CostModel roofs = CostModel::for_hardware(gpu(f.sim_gpu), 0);
  Table a;
  a.name = "kv_bytes_per_request";
  a.title = "(a) KV per request, its transfer time at line rate and its prefill on the " + f.sim_gpu +
            " roofline (computed, bf16)";
  a.columns = {Column{"model", 2}, Column{"tokens", 2}, Column{"KV bytes", 2}, Column{"KV", 2},
               Column{"prefill [ms]", 2}};
  for (const Column& c : link_columns()) a.columns.push_back(c);
  a.columns.push_back({f.sim_link + " / prefill", 3});
  const Link& link = find_link(f.sim_link, "--sim-link");
  for (const char* name : {"qwen2.5-0.5b", "llama-3-8b", "llama-3-70b"})
    for (int tokens : {512, 2048, 8192}) {
      const KvCost k = kv_cost(preset(name), roofs, tokens);
      std::vector<Cell> row{std::string(name), static_cast<long long>(tokens), static_cast<long long>(k.bytes),
                            human_bytes(k.bytes), k.prefill_s * 1e3};
      for (double s : k.link_s) row.push_back(s * 1e3);
      row.push_back(link.bytes_per_second > 0 ? k.bytes / link.bytes_per_second / k.prefill_s : 0.0);
      a.add_row(row);
    }
  a.note =
      "Llama-3-8B at 2,048 tokens: 268,435,456 B (the prefill/decode article's ~270 MB); 70B: 671,088,640 B "
      "(~670 MB). Prefill: one step on one GPU's datasheet roofs, no per-step overhead (70B does not fit one "
      "GPU; a tensor-parallel group divides its time by the degree).";
  return a;
}

// The same for --sim-model over a range of prompt lengths, for the plot: both lines grow with the prompt.
Table transfer_vs_prefill(const Flags& f) {
  const CostModel roofs = CostModel::for_hardware(gpu(f.sim_gpu), 0);
  Table t;
  t.name = "transfer_vs_prefill";
  t.title = "(a, plotted) " + f.sim_model + ": prefill on the " + f.sim_gpu +
            " roofline against the KV transfer, by prompt length (computed)";
  t.columns = {"tokens", Column{"prefill [ms]", 3}};
  for (const Column& c : link_columns()) t.columns.push_back({c.header, 3});
  for (int tokens = 128; tokens <= 16384; tokens *= 2) {
    const KvCost k = kv_cost(preset(f.sim_model), roofs, tokens);
    std::vector<Cell> row{static_cast<long long>(tokens), k.prefill_s * 1e3};
    for (double s : k.link_s) row.push_back(s * 1e3);
    t.add_row(row);
  }
  return t;
}

// Refuses an unknown --sim-gpu, --sim-decode-gpu or --sim-model before anything runs, naming the flag.
void check_sim_names(const Flags& f) {
  for (const auto& [flag, name] : {std::pair{"--sim-gpu", f.sim_gpu}, std::pair{"--sim-decode-gpu", f.sim_decode_gpu}})
    try {
      gpu(name);
    } catch (const Error& e) {
      fail(flag, ": ", e.what());
    }
  try {
    preset(f.sim_model);
  } catch (const Error& e) {
    fail("--sim-model: ", e.what());
  }
}

// Refuses a --servelab that is not an executable file before anything runs: the router and workers it
// should start would otherwise fail unseen, and the lab would give up waiting for an endpoint file.
void check_servelab(const Flags& f) {
  struct stat st {};
  if (::stat(f.exe.c_str(), &st) != 0)
    fail("--servelab ", f.exe, ": ", std::strerror(errno), "; expected the servelab executable (built as ",
         SERVELAB_EXE, ")");
  check(S_ISREG(st.st_mode) && ::access(f.exe.c_str(), X_OK) == 0, "--servelab ", f.exe,
        ": not an executable file; expected the servelab executable (built as ", SERVELAB_EXE, ")");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lab 07: disaggregated prefill and decode", "lab_07_disaggregation"};
  LabOptions o;
  add_serving_options(app, o, "small");
  Flags f{.exe = SERVELAB_EXE};
  add_flags(app, f);
  return run_lab(app, argc, argv, [&] {
    if (o.quick) {
      quick_timing(app, o);
      f.prompt_len = std::min(f.prompt_len, 128);
      f.num_requests = std::min(f.num_requests, 4);
      if (app.count("--rate") == 0) f.rate = 20;  // real-time runs wait for arrivals: keep them short
      if (app.count("--sim-requests") == 0) f.sim_requests = 12;
      if (app.count("--serving-repeats") == 0) f.serving_repeats = 1;
    }
    check_sim_names(f);
    check_servelab(f);
    const Link& gpu_link = find_link(f.sim_link, "--sim-link");
    auto model = load_model(o, false);
    const ModelConfig& c = model->config();
    const int threads = std::max(1, o.threads);
    Report report("07_disaggregation", o.out);
    describe_run(report, *model, o);
    report.setting("workers", "1 prefill + 1 decode process, " + std::to_string(threads) + " thread(s) each");
    report.print_settings("Lab 07: disaggregated prefill and decode");

    const Table a = kv_bytes_table(f);
    report.add_table(a);
    const Table curve = transfer_vs_prefill(f);
    report.add_table(curve);
    report.add_plot(
        {.name = "transfer_vs_prefill",
         .data = columns_of(curve),
         .labels = {"Lab 07: " + f.sim_model + "'s prefill on the " + f.sim_gpu + " roofline vs its KV transfer",
                    "prompt tokens", "ms"},
         .logy = true});
    const Transfers transfers = measured_transfers(o, f, c, threads);
    report.add_table(transfers.table);
    const std::vector<Pattern> patterns = patterns_of(pattern_lengths(o.quick));
    const RealServing real = colocated_vs_disaggregated(report, o, f, c, threads, pattern_lengths(o.quick), patterns);
    report.add_table(real.table);
    const SLO slo{f.slo_ttft_ms / 1e3, f.slo_tpot_ms / 1e3};
    const SimulatorCheck check =
        simulator_check(o, c, threads, real, patterns, transfers.sm_write_bytes_per_second, slo);
    report.add_table(check.table);
    const Fleets fleets = simulated_fleets(report, o, f, gpu_link, check.error);
    gpu_upgrades(report, o, f, gpu_link);
    summarisation_walkthrough(report, f);
    report.add_table(paper_numbers(fleets, f));
    transfer_claims(report, a, f, summarize(real.control_seconds).median);
    serving_claims(report, real, patterns, check, threads);

    // Both sides run the same Engine; only the reductions' thread counts and batch shapes differ, which
    // can flip a near-tie of greedy decoding without batch-invariant reductions (--deterministic).
    const std::string tokens =
        real.same_tokens == real.compared
            ? "1P1D gave the colocated engine's tokens for all " + std::to_string(real.compared) + " requests of (c)"
            : "1P1D gave the colocated engine's tokens for " + std::to_string(real.same_tokens) + " of " +
                  std::to_string(real.compared) +
                  " requests of (c) (the rest differ after a near-tie: the two sides' "
                  "reductions run on other thread counts and batch shapes, and are not batch-invariant)";
    const auto held =
        std::count_if(report.claims().begin(), report.claims().end(), [](const Claim& x) { return x.held; });
    report.verdict("KV moved between separate processes with checksums equal on both sides; " + tokens + "; " +
                   std::to_string(held) + " of " + std::to_string(report.claims().size()) +
                   " claims held; each gives its numbers, and its cause when it did not hold.");
    report.save();
  });
}
