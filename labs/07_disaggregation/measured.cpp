// SPDX-License-Identifier: MIT
/**
 * @file measured.cpp
 * @brief Lab 07's measured tables: (b) KV transfers between real worker
 *        processes, (c) colocated against disaggregated 1P1D serving.
 * @see labs/07_disaggregation/README.md
 */
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "core/error.h"
#include "disagg/client.h"
#include "disagg/process.h"
#include "lab07.h"
#include "serving.h"
#include "workload/synthetic_prompt.h"

namespace servelab::lab07 {

using namespace servelab::lab;
using namespace servelab::disagg;

namespace {

constexpr double kTimeout = 120;  // longest a lab run waits for its requests

// One router, one prefill and one decode worker, for as long as the object lives; @p engine_flags
// set up the workers' engines (the budget, chunking, attention).
struct Cluster {
  Cluster(const std::string& exe, const LabOptions& o, const std::string& tls, const std::string& mode,
          const std::string& link, int threads, const std::vector<std::string>& engine_flags, bool layerwise = false) {
    const std::string file = (std::filesystem::temp_directory_path() /
                              ("servelab-lab07-" + std::to_string(::getpid()) + "-" + std::to_string(count++)))
                                 .string();
    std::filesystem::remove(file);
    router = std::make_unique<ChildProcess>(std::vector<std::string>{exe, "router", "--endpoint-file", file},
                                            std::vector<std::pair<std::string, std::string>>{});
    endpoint = wait_for_endpoint_file(file, 10);
    std::filesystem::remove(file);
    const std::vector<std::pair<std::string, std::string>> env{{"UCX_TLS", tls},
                                                               {"UCX_NET_DEVICES", tls == "tcp" ? "lo" : "all"}};
    for (const char* role : {"prefill", "decode"}) {
      std::vector<std::string> argv{exe, "worker", "--role", role, "--router", endpoint, "--threads",
                                    std::to_string(threads), "--kv-transfer", mode, "--link", link, "--weights-seed",
                                    std::to_string(o.seed), "--num-blocks", "2048",
                                    // A prompt queued behind others on a loaded machine can wait past the
                                    // worker's default 5 s for its KV; the lab waits as long for any request.
                                    "--kv-timeout", std::to_string(kTimeout), "--dtype", o.dtype};
      argv.insert(argv.end(), engine_flags.begin(), engine_flags.end());
      if (layerwise) argv.push_back("--layerwise");
      if (o.model_dir.empty())
        argv.insert(argv.end(), {"--preset", o.preset});
      else
        argv.insert(argv.end(), {"--model", o.model_dir});
      workers.push_back(std::make_unique<ChildProcess>(argv, env));
    }
    wait_for_workers(endpoint, 1, 1,
                     kTimeout);  // both have loaded their weights and registered: nothing timed waits for them
  }
  ~Cluster() {
    shutdown_router(endpoint);
    for (auto& w : workers) w->wait_for(5);
  }
  std::string endpoint;
  std::unique_ptr<ChildProcess> router;
  std::vector<std::unique_ptr<ChildProcess>> workers;
  static inline int count = 0;
};

double median_of(const std::vector<ClientResult>& rs, const char* key) {
  std::vector<double> v;
  for (const ClientResult& r : rs) v.push_back(r.accounting.at(key).get<double>());
  return summarize(v).median;
}

// Requests rebuilt from client timestamps, so that lab 06's metrics code summarises them.
std::vector<std::unique_ptr<Request>> as_requests(const std::vector<ClientRequest>& sent,
                                                  const std::vector<ClientResult>& got) {
  std::vector<std::unique_ptr<Request>> out;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    check(got[i].error.empty(), "disaggregated request ", i, " failed: ", got[i].error);
    auto r = std::make_unique<Request>(static_cast<int>(i), sent[i].prompt, SamplingParams{}, sent[i].max_tokens,
                                       std::vector<std::int32_t>{}, got[i].times.arrival);
    r->times.first_scheduled = got[i].times.first_scheduled;
    for (std::size_t t = 0; t < got[i].tokens.size(); ++t)
      r->append_output_token(got[i].tokens[t], got[i].times.token_times[t]);
    out.push_back(std::move(r));
  }
  return out;
}

// Serves @p sent on @p cluster (1P1D): a lone warm-up first, whose TTFT less its prefill and transfer is the
// control plane's share (appended to @p control_seconds), then the whole workload.
std::vector<std::unique_ptr<Request>> serve_disaggregated(const Cluster& cluster,
                                                          const std::vector<ClientRequest>& sent,
                                                          std::vector<double>& control_seconds) {
  const ClientResult warm = run_client(cluster.endpoint, std::span(sent).first(1), kTimeout).at(0);
  check(warm.error.empty() && !warm.times.token_times.empty(), "disaggregated warm-up failed: ", warm.error);
  control_seconds.push_back(
      warm.times.token_times[0] - warm.times.arrival -
      (warm.accounting.at("prefill_ms").get<double>() + warm.accounting.at("transfer_ms").get<double>()) / 1e3);
  return as_requests(sent, run_client(cluster.endpoint, sent, kTimeout));
}

}  // namespace

PatternLengths pattern_lengths(bool quick) {
  return {
      .s_prompt = quick ? 32 : 96, .l_prompt = quick ? 192 : 1024, .s_out = quick ? 4 : 16, .l_out = quick ? 8 : 128};
}

std::vector<Pattern> patterns_of(const PatternLengths& n) {
  return {
      {"short prompt, short output", "continuous batching", LengthDist::uniform(n.s_prompt / 2, n.s_prompt),
       LengthDist::fixed(n.s_out)},
      {"short prompt, long output", "chunked prefill", LengthDist::uniform(n.s_prompt / 2, n.s_prompt),
       LengthDist::fixed(n.l_out)},
      {"long prompt, short output", "disaggregated, more prefill", LengthDist::uniform(n.l_prompt / 2, n.l_prompt),
       LengthDist::fixed(n.s_out)},
      {"long prompt, long output", "disaggregated, even split", LengthDist::uniform(n.l_prompt / 2, n.l_prompt),
       LengthDist::fixed(n.l_out)},
      {"mixed", "chunked prefill, then disaggregated", LengthDist::uniform(n.s_prompt / 2, n.l_prompt),
       LengthDist::uniform(n.s_out, n.l_out)},
  };
}

// (b) Measured transfers between real processes: one cluster per (transport, mode, link, streaming), the same
// prompts through each, checksums compared on both sides. Shows what a transfer costs here against a prefill.
Transfers measured_transfers(const LabOptions& o, const Flags& f, const ModelConfig& c, int threads) {
  Transfers out;
  Table& b = out.table;
  b.name = "measured_transfers";
  b.title = "(b) Measured KV transfers, " + std::to_string(f.prompt_len) +
            "-token prompts, median of the requests (this machine, loopback)";
  b.columns = {"UCX_TLS",
               "mode",
               "KV sent",
               "link",
               "bytes",
               "descriptors",
               "coalesced",
               Column{"transfer [ms]", 3},
               Column{"GB/s", 2},
               Column{"transfer / prefill", 3},
               "overlapped [%]",
               Column{"paced ms (bytes/rate)", 3},
               Column{"error [%]", 1}};
  std::vector<ClientRequest> same;
  for (int i = 0; i < std::max(3, o.repeats); ++i) {
    ClientRequest r;
    for (int t = 0; t < f.prompt_len; ++t) r.prompt.push_back((t * 31 + i * 7) % c.vocab_size);
    r.max_tokens = 2;
    same.push_back(r);
  }
  struct Config {
    std::string tls, mode, link;
    bool layerwise = false;
  };
  const std::vector<Config> configs = {
      {"tcp", "write", "none"},      {"tcp", "read", "none"},        {"tcp", "send", "none"},
      {"sm", "write", "none"},       {"sm", "read", "none"},         {"sm", "send", "none"},
      {"sm", "write", "none", true}, {"tcp", "write", "none", true}, {"sm", "write", "ib-hdr"},
      {"tcp", "write", "ib-hdr"},    {"sm", "write", "ib-hdr", true}};
  Progress bar("transfers", static_cast<long>(configs.size()));
  for (const auto& [tls, mode, link, layerwise] : configs) {
    // Whole prompts in one step: the transfer follows one forward pass (and --layerwise streams it).
    Cluster cluster(f.exe, o, tls, mode, link, threads,
                    {"--max-num-batched-tokens", std::to_string(std::max(2048, f.prompt_len))}, layerwise);
    (void)run_client(cluster.endpoint, std::span(same).first(1),
                     kTimeout);  // warm-up: connections are made on first use
    const std::vector<ClientResult> rs = run_client(cluster.endpoint, same, kTimeout);
    for (const ClientResult& r : rs) {
      check(r.error.empty(), "transfer (", tls, ", ", mode, "): ", r.error);
      check(r.accounting.at("src_checksum") == r.accounting.at("dst_checksum"), "KV checksum mismatch (", tls, ", ",
            mode, ")");
    }
    const Message& first = rs[0].accounting;
    const double ms = median_of(rs, "transfer_ms");
    const double pace = first.at("paced_bytes_per_second").get<double>();
    const double ideal = pace > 0 ? first.at("bytes").get<double>() / pace * 1e3 : 0;
    const Cell none = std::string("—");  // no pacing: nothing to compare with
    b.add_row({tls, mode, std::string(layerwise ? "per layer" : "after prefill"), link,
               static_cast<long long>(first.at("bytes").get<std::uint64_t>()),
               static_cast<long long>(first.at("descriptors_uncoalesced").get<long>()),
               static_cast<long long>(first.at("descriptors").get<long>()), ms, median_of(rs, "gb_per_s"),
               median_of(rs, "transfer_over_prefill"), layerwise ? Cell{100 * median_of(rs, "overlap_fraction")} : none,
               pace > 0 ? Cell{ideal} : none, pace > 0 ? Cell{(ms - ideal) / ideal * 100} : none});
    if (tls == "sm" && mode == "write" && link == "none" && !layerwise)
      out.sm_write_bytes_per_second = median_of(rs, "gb_per_s") * 1e9;
    bar.advance();
  }
  b.note =
      "Blocks of one request are consecutive in both pools here, so coalescing leaves one descriptor per (layer, K/V). "
      "ib-hdr rows pace to HDR's 25 GB/s scaled by this model's KV bytes per token over Llama-3-8B's "
      "(ratio-preserving). "
      "'per layer' rows stream each layer's KV from a second thread while later layers compute (--layerwise); "
      "'overlapped' is the share of the transfer time that ran during the forward pass. "
      "'—': nothing to compare (no pacing, or the whole KV sent after the prefill).";
  return out;
}

// (c) Colocated (lab 06: chunked prefill, continuous batching) vs disaggregated 1P1D on the request patterns
// of the prefill/decode article's strategy table, lengths scaled down to this machine: lab 06's rung and
// lab 07's on the same workloads and the same cores in total, TTFT/TPOT and goodput under an SLO.
RealServing colocated_vs_disaggregated(Report& report, const LabOptions& o, const Flags& f, const ModelConfig& c,
                                       int threads, const PatternLengths& lengths,
                                       const std::vector<Pattern>& patterns) {
  const SLO slo{f.slo_ttft_ms / 1e3, f.slo_tpot_ms / 1e3};
  RealServing out;
  Table& t = out.table;
  t.name = "colocated_vs_disaggregated";
  t.title =
      "(c) Colocated vs disaggregated 1P1D on the prefill/decode article's request patterns, real, this "
      "machine, median of " +
      std::to_string(f.serving_repeats) + " run(s)";
  t.columns = {"pattern",
               "article suggests",
               "serving",
               Column{"TTFT p50 [ms]", 1},
               "TTFT p50 range",
               Column{"TTFT p99 [ms]", 1},
               Column{"TPOT p50 [ms]", 2},
               "TPOT p50 range",
               Column{"TPOT p99 [ms]", 2},
               Column{"tok/s", 1},
               "met SLO",
               Column{"goodput [req/s]", 2}};
  // Lab 06's configuration and lab 07's over one base: both use 2 x --threads cores in all.
  LabConfig base;
  base.model = model_options(
      [&] {
        LabOptions x = o;
        x.threads = 2 * threads;
        return x;
      }(),
      false);
  base.engine.scheduler.max_num_batched_tokens = 512;
  const auto [lab6, lab7] = compare_rungs(report, 7, base, "colocated", "1P1D");
  auto colocated = load_model(o, lab6.model);
  use_config(*colocated, lab6);
  out.weight_dtype = colocated->options().weight_dtype;
  // Disaggregated: a prefill and a decode worker with half the threads each, whose engines run lab 07's
  // configuration: the budget, chunked prefill and attention kernels of the colocated engine.
  std::vector<std::string> lab7_flags = {"--max-num-batched-tokens",
                                         std::to_string(lab7.engine.scheduler.max_num_batched_tokens), "--attention",
                                         to_string(lab7.model.attention)};
  if (lab7.engine.scheduler.enable_chunked_prefill) lab7_flags.push_back("--enable-chunked-prefill");
  Cluster cluster(f.exe, o, "sm", "write", "none", lab7.model.num_threads / 2, lab7_flags);
  out.colocated_config = lab6.engine;
  out.colocated_config.log = silent;
  {
    // Warm-up, as the cluster gets one per pattern: the first steps of a fresh process are slow.
    Engine engine(*colocated, out.colocated_config);
    replay(engine,
           {{.arrival_s = 0, .prompt_ids = synthetic_prompt(lengths.l_prompt, c.vocab_size, 1), .max_tokens = 2}});
  }
  const std::array<std::string, 2> serving = {
      "colocated, " + std::to_string(2 * threads) + " threads",
      "1P1D, " + std::to_string(threads) + " + " + std::to_string(threads) + " threads"};
  Progress patterns_bar("patterns", static_cast<long>(patterns.size() * static_cast<std::size_t>(f.serving_repeats)));
  for (const Pattern& pattern : patterns) {
    WorkloadSpec spec;
    spec.num_requests = f.num_requests;
    spec.prompt_len = pattern.prompt;
    spec.output_len = pattern.output;
    spec.arrivals = parse_arrivals("poisson:" + std::to_string(f.rate), "--rate");
    spec.seed = o.seed;
    const std::vector<WorkloadRequest>& workload = out.workloads.emplace_back(make_workload(spec, c.vocab_size));
    std::array<std::vector<ServingMetrics>, 2> runs;  // [colocated, 1P1D][repeat]
    // The two modes take turns, so a slow spell of the machine falls on both.
    for (int repeat = 0; repeat < f.serving_repeats; ++repeat) {
      // Colocated: one engine with lab 06's switches and both workers' threads.
      Engine engine(*colocated, out.colocated_config);
      const ServedRun run = serve_workload(
          engine, workload, [&](Engine&, const StepStats& s, auto) { out.steps.push_back(timed_work(s)); });
      runs[0].push_back(summarize_requests(run.requests, slo));
      // Disaggregated: the same workload through the router, the KV moved between the workers.
      std::vector<ClientRequest> sent;
      for (const WorkloadRequest& w : workload) sent.push_back({w.prompt_ids, w.max_tokens, w.arrival_s});
      const auto requests = serve_disaggregated(cluster, sent, out.control_seconds);
      std::vector<const Request*> view;
      for (const auto& r : requests) view.push_back(r.get());
      runs[1].push_back(summarize_requests(view, slo));
      const auto disaggregated_tokens = output_tokens(view);
      for (std::size_t i = 0; i < requests.size(); ++i, ++out.compared)
        out.same_tokens += disaggregated_tokens[i] == run.tokens.at(i);
      patterns_bar.advance();
    }
    std::array<RealRow, 2>& real = out.real.emplace_back();
    for (std::size_t mode = 0; mode < 2; ++mode) {
      // Each cell: the median over the repeats of that run's statistic.
      const auto over = [&](auto field) {
        std::vector<double> v;
        for (const ServingMetrics& m : runs[mode]) v.push_back(field(m));
        return summarize(v);
      };
      RealRow& r = real[mode];
      r.ttft_p50 = over([](const ServingMetrics& m) { return m.ttft.median; });
      r.ttft_p99 = over([](const ServingMetrics& m) { return m.ttft.p99; });
      r.tpot_p50 = over([](const ServingMetrics& m) { return m.tpot.median; });
      r.tpot_p99 = over([](const ServingMetrics& m) { return m.tpot.p99; });
      const auto range = [](const Summary& x, int digits) {
        return plain_number(std::round(x.min * 1e3 * std::pow(10, digits)) / std::pow(10, digits)) + "-" +
               plain_number(std::round(x.max * 1e3 * std::pow(10, digits)) / std::pow(10, digits));
      };
      t.add_row({pattern.name, pattern.article_says, serving[mode], r.ttft_p50.median * 1e3, range(r.ttft_p50, 1),
                 r.ttft_p99.median * 1e3, r.tpot_p50.median * 1e3, range(r.tpot_p50, 2), r.tpot_p99.median * 1e3,
                 over([](const ServingMetrics& m) { return m.output_tokens_per_second; }).median,
                 static_cast<long long>(std::lround(
                     over([](const ServingMetrics& m) { return static_cast<double>(m.num_meeting_slo); }).median)),
                 over([](const ServingMetrics& m) { return m.goodput; }).median});
    }
  }
  report.setting("patterns", "short prompt " + std::to_string(lengths.s_prompt / 2) + ".." +
                                 std::to_string(lengths.s_prompt) + ", long " + std::to_string(lengths.l_prompt / 2) +
                                 ".." + std::to_string(lengths.l_prompt) + " tokens; short output " +
                                 std::to_string(lengths.s_out) + ", long " + std::to_string(lengths.l_out) + "; " +
                                 std::to_string(f.num_requests) + " requests, Poisson " + plain_number(f.rate) + "/s");
  t.note = "SLO: TTFT <= " + std::to_string(static_cast<int>(f.slo_ttft_ms)) +
           " ms, TPOT <= " + std::to_string(static_cast<int>(f.slo_tpot_ms)) +
           " ms. Both rows of a pattern use the same cores in total; each cell is the median over the runs, "
           "'range' the smallest and largest of them [ms].";
  return out;
}

}  // namespace servelab::lab07
