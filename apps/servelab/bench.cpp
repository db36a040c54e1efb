// SPDX-License-Identifier: MIT
#include <algorithm>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>

#include <httplib.h>

#include "core/json.h"
#include "core/timer.h"
#include "cli/trace_flags.h"
#include "command.h"
#include "engine_flags.h"
#include "loadgen/bench_client.h"

namespace servelab::cli {

namespace {

struct BenchArgs {
  EngineFlags engine;        // --model/--preset name the served model; the rest set up --compare-in-process
  bool given_model = false;  // --model or --preset was on the command line
  BenchConfig client;
  int num_prompts = 100;
  std::string request_rate = "inf";
  std::string prompt_len = "fixed:128";
  std::string output_len = "fixed:128";
  std::string dataset_path;
  std::vector<std::string> goodput;
  bool compare_in_process = false;
  TraceFlags trace;  // --trace: the in-process run's steps, to set beside `servelab serve --trace`
  bool save_result = false;
  std::string result_filename = "bench_serve.json";
};

// The served model's name, vocabulary and context, from GET /v1/models.
struct ServerModel {
  std::string name;
  int vocab_size = 0;
  int max_model_len = 0;
};

ServerModel ask_server(const BenchConfig& c) {
  httplib::Client client(c.host, c.port);
  client.set_read_timeout(30);
  httplib::Headers headers;
  if (!c.api_key.empty()) headers.emplace("Authorization", "Bearer " + c.api_key);
  const auto res = client.Get("/v1/models", headers);
  check(res && res->status == 200, "--host ", c.host, " --port ", c.port, ": GET /v1/models failed (",
        res ? "HTTP " + std::to_string(res->status) : httplib::to_string(res.error()),
        "); is `servelab serve` running?");
  const nlohmann::json j = parse_json(res->body, "GET /v1/models");
  check(j.contains("data") && j["data"].is_array() && !j["data"].empty() && j["data"][0].is_object(),
        "GET /v1/models: no model in 'data'");
  const nlohmann::json& card = j["data"][0];
  check(card.contains("id") && card["id"].is_string(), "GET /v1/models: data[0].id is not a string");
  return {card["id"].get<std::string>(),
          json_int<int>(card.value("vocab_size", nlohmann::json()), 1, 1 << 24, "GET /v1/models: data[0].vocab_size"),
          json_int<int>(card.value("max_model_len", nlohmann::json()), 2, 1 << 24,
                        "GET /v1/models: data[0].max_model_len")};
}

int run_bench_serve(BenchArgs& a) {
  // Flag mistakes first, before the server is asked anything.
  BenchLabels labels;
  labels.request_rate = a.request_rate;
  labels.goodput = parse_goodput(a.goodput);
  const std::unique_ptr<ChromeTrace> trace = open_trace(a.trace);  // a bad path fails now, not after the HTTP run
  check(a.num_prompts >= 1, "--num-prompts must be >= 1, got ", a.num_prompts);
  const ServerModel server = ask_server(a.client);
  if (a.given_model) {
    const std::string mine = a.engine.model_dir.empty() ? a.engine.preset : a.engine.model_dir;
    check(mine == server.name, "--model/--preset '", mine, "' is not the model the server serves ('", server.name,
          "')");
  }
  a.client.model = server.name;
  WorkloadSpec spec;
  spec.num_requests = a.dataset_path.empty() ? a.num_prompts : 0;
  spec.prompt_len = parse_length_dist(a.prompt_len, LengthRole::prompt, "--prompt-len-dist");
  spec.output_len = parse_length_dist(a.output_len, LengthRole::output, "--output-len-dist");
  spec.arrivals = a.request_rate == "inf" ? Arrivals{} : parse_arrivals("poisson:" + a.request_rate, "--request-rate");
  spec.seed = a.client.seed;
  spec.file = a.dataset_path;
  std::vector<WorkloadRequest> workload = make_workload(spec, server.vocab_size);
  if (const int cut = clamp_to_context(workload, server.max_model_len); cut > 0)
    std::cerr << "bench serve: " << cut << " requests cut to the server's max_model_len " << server.max_model_len
              << "\n";
  std::cerr << "bench serve: " << spec.describe() << ", max concurrency "
            << (a.client.max_concurrency ? std::to_string(a.client.max_concurrency) : "none") << ", model "
            << server.name << "\n";

  const int total = static_cast<int>(workload.size());
  const double server_cpu_before = server_cpu_seconds(a.client), client_cpu_before = process_cpu_seconds();
  const BenchResult result = run_bench(workload, a.client, [total](int done, int) {
    if (done == total || done % std::max(1, total / 10) == 0)
      std::cerr << "bench serve: " << done << "/" << total << " done\n";
  });
  labels.client_cpu_seconds = process_cpu_seconds() - client_cpu_before;
  if (const double after = server_cpu_seconds(a.client); server_cpu_before >= 0 && after >= server_cpu_before)
    labels.server_cpu_seconds = after - server_cpu_before;
  if (result.connection_limit > 0)
    std::cerr
        << "bench serve: ulimit -n allowed " << result.connection_limit
        << " connections at once; the other requests waited for one (in their TTFT), as under --max-concurrency\n";
  if (a.compare_in_process) {
    check(a.given_model, "--compare-in-process needs --model or --preset (the model to run in this process)");
    std::unique_ptr<Model> model = load_model(a.engine);
    Engine engine(*model, engine_config(a.engine, model->config(),
                                        [](const std::string& line) { std::cerr << "bench serve: " << line << "\n"; }));
    if (trace) trace->attach(engine, "servelab bench serve, in process");
    std::cerr << "bench serve: the same workload in process (no HTTP) ...\n";
    const double cpu_before = process_cpu_seconds();
    labels.in_process_tokens_per_second = run_in_process(engine, workload, a.client.max_concurrency);
    labels.in_process_cpu_seconds = process_cpu_seconds() - cpu_before;
    if (trace) {
      trace->close();
      std::cerr << "bench serve: trace " << trace->summary() << "\n";
    }
  }
  std::cout << format_bench_result(result, a.client, labels) << std::flush;
  if (a.save_result) {
    std::ofstream out(a.result_filename);
    out << bench_result_json(result, a.client, labels).dump(2) << "\n";
    check(out.good(), a.result_filename, ": cannot write the result JSON");
    std::cerr << "bench serve: wrote " << a.result_filename << "\n";
  }
  // A run whose requests failed is a failed run, whatever the block above shows.
  if (const BenchRequestResult* failed = first_failure(result)) {
    const auto n = std::count_if(result.requests.begin(), result.requests.end(),
                                 [](const BenchRequestResult& r) { return !r.success && !r.disconnected; });
    fail("bench serve: ", n, " of ", result.requests.size(), " requests failed; the first: ", failed->error);
  }
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  CLI::App* command =
      bench->add_subcommand("serve", "load a running `servelab serve` as `vllm bench serve` does, and print its block");
  add_engine_flags(*command, a->engine);
  command->add_option("--host", a->client.host, "server address")->capture_default_str();
  command->add_option("--port", a->client.port, "server port")->capture_default_str();
  command->add_option("--api-key", a->client.api_key, "sent as `Authorization: Bearer KEY`");
  command->add_option("--num-prompts", a->num_prompts, "requests to send")->capture_default_str();
  command->add_option("--request-rate", a->request_rate, "requests/s of Poisson arrivals, or inf (all at once)")
      ->capture_default_str();
  command->add_option("--max-concurrency", a->client.max_concurrency, "most requests in flight; 0 = no cap")
      ->capture_default_str();
  command
      ->add_option("--prompt-len-dist", a->prompt_len,
                   "prompt lengths: fixed:N, uniform:LO:HI, lognormal:..., sharegpt")
      ->capture_default_str();
  command->add_option("--output-len-dist", a->output_len, "output lengths (max_tokens), same forms")
      ->capture_default_str();
  command->add_option("--dataset-path", a->dataset_path, "JSONL workload file (prompt_len or prompt_ids, output_len)");
  command->add_option("--seed", a->client.seed, "workload seed")->capture_default_str();
  command->add_flag("--ignore-eos", a->client.ignore_eos, "generate max_tokens tokens even past the end token");
  command->add_option("--goodput", a->goodput, "SLOs a request must meet to count as good: ttft:MS tpot:MS");
  command
      ->add_option("--disconnect-fraction", a->client.disconnect_fraction,
                   "share of requests that hang up after 1-4 tokens (a load test of aborts)")
      ->capture_default_str();
  command->add_option("--timeout", a->client.timeout_s, "per-request read timeout, seconds")->capture_default_str();
  command->add_flag("--compare-in-process", a->compare_in_process,
                    "also run the workload through the engine in this process and print the HTTP overhead");
  add_trace_flags(*command, a->trace);
  command->add_flag("--save-result", a->save_result, "write the result JSON (vLLM's field names)");
  command->add_option("--result-filename", a->result_filename, "where --save-result writes")->capture_default_str();
  return {bench, [a, command] {
            a->given_model =
                command->get_option("--model")->count() > 0 || command->get_option("--preset")->count() > 0;
            check(a->trace.path.empty() || a->compare_in_process,
                  "--trace records the in-process run's steps: it needs --compare-in-process");
            return run_bench_serve(*a);
          }};
}

}  // namespace servelab::cli
