/**
 * @file main.cpp
 * @brief Lab 07 — disaggregated prefill and decode: separate worker
 *        processes, the KV moved between them over UCX, requests routed over
 *        ZeroMQ, against lab 06's colocated engine.
 *
 * Three tables: (a) the KV bytes a request moves for the real presets and
 * how long that takes on each named link (computed); (b) transfers measured
 * here, between real processes, by mode and UCX transport, with the link
 * emulation's error; (c) the same workload served colocated (lab 06) and
 * disaggregated 1P1D, TTFT/TPOT and goodput under an SLO.
 * @see labs/07_disaggregation/README.md
 */
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <unistd.h>

#include "core/error.h"
#include "disagg/client.h"
#include "disagg/link.h"
#include "disagg/process.h"
#include "lab.h"
#include "serve/engine.h"
#include "serve/ladder.h"
#include "serve/metrics.h"
#include "serve/workload.h"

using namespace servelab;
using namespace servelab::lab;
using namespace servelab::disagg;

namespace {

constexpr double kTimeout = 120;  // longest a lab run waits for its requests

// One router, one prefill and one decode worker, for as long as the object lives.
struct Cluster {
  Cluster(const std::string& exe, const LabOptions& o, const std::string& tls, const std::string& mode,
          const std::string& link, int threads) {
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
                                    std::to_string(threads), "--kv-transfer", mode, "--link", link,
                                    "--weights-seed", std::to_string(o.seed), "--num-blocks", "2048"};
      if (o.model_dir.empty()) argv.insert(argv.end(), {"--preset", o.preset});
      else argv.insert(argv.end(), {"--model", o.model_dir});
      workers.push_back(std::make_unique<ChildProcess>(argv, env));
    }
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
    for (std::size_t t = 0; t < got[i].tokens.size(); ++t) r->append_output_token(got[i].tokens[t], got[i].times.token_times[t]);
    out.push_back(std::move(r));
  }
  return out;
}

std::string fixed(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lab 07: disaggregated prefill and decode", "lab_07_disaggregation"};
  LabOptions o;
  add_common_options(app, o, "small");
  std::string exe = SERVELAB_EXE;
  int prompt_len = 512, num_requests = 12;
  double rate = 4, slo_ttft_ms = 500, slo_tpot_ms = 50;
  app.add_option("--servelab", exe, "the servelab executable that runs the router and workers")->capture_default_str();
  app.add_option("--prompt-len", prompt_len, "prompt tokens of the measured transfers")->check(CLI::Range(1, 8192))->capture_default_str();
  app.add_option("--requests", num_requests, "requests of the serving comparison")->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--rate", rate, "Poisson arrival rate of the serving comparison, requests/s")->check(CLI::Range(0.01, 1e4))->capture_default_str();
  app.add_option("--slo-ttft-ms", slo_ttft_ms, "goodput's TTFT limit")->check(CLI::Range(1e-3, 1e7))->capture_default_str();
  app.add_option("--slo-tpot-ms", slo_tpot_ms, "goodput's TPOT limit")->check(CLI::Range(1e-3, 1e7))->capture_default_str();
  return run_lab(app, argc, argv, [&] {
    if (o.quick) {
      quick_timing(app, o);
      prompt_len = std::min(prompt_len, 128);
      num_requests = std::min(num_requests, 4);
      if (app.count("--rate") == 0) rate = 20;  // real-time runs wait for arrivals: keep them short
    }
    check(Techniques::for_lab(7).disaggregation, "the ladder has no disaggregation switch");
    auto model = load_model(o, false);
    const ModelConfig& c = model->config();
    Report report("07_disaggregation", o.out);
    describe_run(report, *model, o);
    report.setting("workers", "1 prefill + 1 decode process, " + std::to_string(std::max(1, o.threads)) + " thread(s) each");
    report.print_settings("Lab 07: disaggregated prefill and decode");

    // (a) What moves, computed: 2 * layers * kv_heads * head_dim * tokens * 2 bytes (bf16).
    Table a;
    a.name = "kv_bytes_per_request";
    a.title = "(a) KV per request and its transfer time at line rate (computed, bf16)";
    a.columns = {"model", "tokens", "KV bytes", "KV"};
    for (const Link& l : named_links())
      if (l.bytes_per_second > 0) a.columns.push_back(l.name + " [ms]");
    a.precision.assign(a.columns.size(), 2);
    for (const char* name : {"qwen2.5-0.5b", "llama-3-8b", "llama-3-70b"})
      for (int tokens : {512, 2048, 8192}) {
        const double bytes = kv_bytes_per_token(preset(name), 2) * tokens;
        std::vector<Cell> row{std::string(name), static_cast<long long>(tokens), static_cast<long long>(bytes), human_bytes(bytes)};
        for (const Link& l : named_links())
          if (l.bytes_per_second > 0) row.push_back(bytes / l.bytes_per_second * 1e3);
        a.add_row(row);
      }
    a.note = "Llama-3-8B at 2,048 tokens: 268,435,456 B (the seed's ~270 MB); 70B: 671,088,640 B (~670 MB).";
    report.add_table(a);

    // (b) Measured transfers between real processes.
    const int threads = std::max(1, o.threads);
    Table b;
    b.name = "measured_transfers";
    b.title = "(b) Measured KV transfers, " + std::to_string(prompt_len) +
              "-token prompts, median of the requests (this machine, loopback)";
    b.columns = {"UCX_TLS", "mode", "link", "bytes", "descriptors", "coalesced", "transfer [ms]", "GB/s",
                 "transfer / prefill", "paced ms (bytes/rate)", "error [%]"};
    b.precision = {0, 0, 0, 0, 0, 0, 3, 2, 3, 3, 1};
    std::vector<ClientRequest> same;
    for (int i = 0; i < std::max(3, o.repeats); ++i) {
      ClientRequest r;
      for (int t = 0; t < prompt_len; ++t) r.prompt.push_back((t * 31 + i * 7) % c.vocab_size);
      r.max_tokens = 2;
      same.push_back(r);
    }
    const std::vector<std::array<std::string, 3>> configs = {
        {"tcp", "write", "none"}, {"tcp", "read", "none"}, {"tcp", "send", "none"}, {"sm", "write", "none"},
        {"sm", "read", "none"},   {"sm", "send", "none"},  {"sm", "write", "ib-hdr"}, {"tcp", "write", "ib-hdr"}};
    Progress bar("transfers", static_cast<long>(configs.size()));
    for (const auto& [tls, mode, link] : configs) {
      Cluster cluster(exe, o, tls, mode, link, threads);
      (void)run_client(cluster.endpoint, std::span(same).first(1), kTimeout);  // warm-up: connections are made on first use
      const std::vector<ClientResult> rs = run_client(cluster.endpoint, same, kTimeout);
      for (const ClientResult& r : rs) {
        check(r.error.empty(), "transfer (", tls, ", ", mode, "): ", r.error);
        check(r.accounting.at("src_checksum") == r.accounting.at("dst_checksum"), "KV checksum mismatch (", tls, ", ", mode, ")");
      }
      const Message& first = rs[0].accounting;
      const double ms = median_of(rs, "transfer_ms");
      const double pace = first.at("paced_bytes_per_second").get<double>();
      const double ideal = pace > 0 ? first.at("bytes").get<double>() / pace * 1e3 : 0;
      b.add_row({tls, mode, link, static_cast<long long>(first.at("bytes").get<std::uint64_t>()),
                 static_cast<long long>(first.at("descriptors_uncoalesced").get<long>()),
                 static_cast<long long>(first.at("descriptors").get<long>()), ms, median_of(rs, "gb_per_s"),
                 median_of(rs, "transfer_over_prefill"), ideal, pace > 0 ? (ms - ideal) / ideal * 100 : 0.0});
      bar.advance();
    }
    b.note = "Blocks of one request are consecutive in both pools here, so coalescing leaves one descriptor per (layer, K/V). "
             "ib-hdr rows pace to HDR's 25 GB/s scaled by this model's KV bytes per token over Llama-3-8B's (ratio-preserving).";
    report.add_table(b);

    // (c) Colocated (lab 06: chunked prefill, continuous batching) vs disaggregated 1P1D on the
    // request patterns of seed 001's strategy table, lengths scaled down to this machine.
    const int s_prompt = o.quick ? 32 : 96, l_prompt = o.quick ? 192 : 1024, s_out = o.quick ? 4 : 16,
              l_out = o.quick ? 8 : 128;
    struct Pattern {
      std::string name, seed_says;
      LengthDist prompt, output;
    };
    const std::vector<Pattern> patterns = {
        {"short prompt, short output", "continuous batching", LengthDist::uniform(s_prompt / 2, s_prompt), LengthDist::fixed(s_out)},
        {"short prompt, long output", "chunked prefill", LengthDist::uniform(s_prompt / 2, s_prompt), LengthDist::fixed(l_out)},
        {"long prompt, short output", "disaggregated, more prefill", LengthDist::uniform(l_prompt / 2, l_prompt), LengthDist::fixed(s_out)},
        {"long prompt, long output", "disaggregated, even split", LengthDist::uniform(l_prompt / 2, l_prompt), LengthDist::fixed(l_out)},
        {"mixed", "chunked prefill, then disaggregated", LengthDist::uniform(s_prompt / 2, l_prompt), LengthDist::uniform(s_out, l_out)},
    };
    const SLO slo{slo_ttft_ms / 1e3, slo_tpot_ms / 1e3};
    Table t;
    t.name = "colocated_vs_disaggregated";
    t.title = "(c) Colocated vs disaggregated 1P1D on seed 001's request patterns, real, this machine";
    t.columns = {"pattern", "seed 001 suggests", "serving", "TTFT p50 [ms]", "TTFT p99 [ms]", "TPOT p50 [ms]",
                 "TPOT p99 [ms]", "tok/s", "met SLO", "goodput [req/s]"};
    t.precision = {0, 0, 0, 1, 1, 2, 2, 1, 0, 2};
    auto colocated = load_model([&] { LabOptions x = o; x.threads = 2 * threads; return x; }(), false);
    Cluster cluster(exe, o, "sm", "write", "none", threads);
    Progress patterns_bar("patterns", static_cast<long>(patterns.size()));
    for (const Pattern& pattern : patterns) {
      WorkloadSpec spec;
      spec.num_requests = num_requests;
      spec.prompt_len = pattern.prompt;
      spec.output_len = pattern.output;
      spec.arrivals = parse_arrivals("poisson:" + std::to_string(rate), "--rate");
      spec.seed = o.seed;
      const std::vector<WorkloadRequest> workload = make_workload(spec, c.vocab_size);
      const auto add = [&](const std::string& serving, const std::vector<const Request*>& rs) {
        const ServingMetrics m = summarize_requests(rs, slo);
        t.add_row({pattern.name, pattern.seed_says, serving, m.ttft.median * 1e3, m.ttft.p99 * 1e3, m.tpot.median * 1e3,
                   m.tpot.p99 * 1e3, m.output_tokens_per_second, static_cast<long long>(m.num_meeting_slo), m.goodput});
      };
      {
        // Colocated: one engine with lab 06's switches and both workers' threads.
        EngineConfig config;
        config.scheduler.enable_chunked_prefill = Techniques::for_lab(6).chunked_prefill;
        config.scheduler.max_num_batched_tokens = 512;
        config.log = [](const std::string&) {};
        Engine engine(*colocated, config);
        std::size_t next = 0;
        while (next < workload.size() || engine.has_unfinished_requests()) {
          while (next < workload.size() && workload[next].arrival_s <= engine.now()) {
            engine.add_request(workload[next].prompt_ids, {}, workload[next].max_tokens, {}, workload[next].arrival_s);
            ++next;
          }
          if (engine.has_unfinished_requests()) engine.step();
          else if (next < workload.size()) usleep(static_cast<useconds_t>((workload[next].arrival_s - engine.now()) * 1e6) + 1);
        }
        add("colocated, " + std::to_string(2 * threads) + " threads", engine.requests());
      }
      {
        std::vector<ClientRequest> sent;
        for (const WorkloadRequest& w : workload) sent.push_back({w.prompt_ids, w.max_tokens, w.arrival_s});
        (void)run_client(cluster.endpoint, std::span(sent).first(1), kTimeout);  // warm-up
        const auto requests = as_requests(sent, run_client(cluster.endpoint, sent, kTimeout));
        std::vector<const Request*> view;
        for (const auto& r : requests) view.push_back(r.get());
        add("1P1D, " + std::to_string(threads) + " + " + std::to_string(threads) + " threads", view);
      }
      patterns_bar.advance();
    }
    report.setting("patterns", "short prompt " + std::to_string(s_prompt / 2) + ".." + std::to_string(s_prompt) +
                                   ", long " + std::to_string(l_prompt / 2) + ".." + std::to_string(l_prompt) +
                                   " tokens; short output " + std::to_string(s_out) + ", long " + std::to_string(l_out) +
                                   "; " + std::to_string(num_requests) + " requests, Poisson " + fixed(rate) + "/s");
    t.note = "SLO: TTFT <= " + std::to_string(static_cast<int>(slo_ttft_ms)) + " ms, TPOT <= " +
             std::to_string(static_cast<int>(slo_tpot_ms)) + " ms. Both rows of a pattern use the same cores in total.";
    report.add_table(t);
    report.verdict("KV moved between separate processes with checksums equal on both sides; see (c) for what the split bought here.");
    report.save();
  });
}
