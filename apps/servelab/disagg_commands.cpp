#include "disagg_commands.h"

#include <iostream>
#include <memory>

#include "disagg/router.h"
#include "disagg/worker.h"

namespace servelab {

namespace {

// The flags' values live as long as the application (CLI11 writes into them at parse time).
struct Values {
  disagg::RouterConfig router;
  disagg::WorkerConfig worker;
  std::string mode = "write";
  std::string role;
};

Values& values() {
  static Values v;
  return v;
}

}  // namespace

DisaggCommands add_disagg_commands(CLI::App& app) {
  Values& v = values();
  DisaggCommands c;
  c.router = app.add_subcommand("router", "lab 07: the control plane's hub that prefill/decode workers and clients connect to");
  c.router->add_option("--control", v.router.endpoint, "ZeroMQ endpoint to bind (port 0 = ephemeral)")->capture_default_str();
  c.router->add_option("--endpoint-file", v.router.endpoint_file, "write the bound endpoint to this file");
  c.router->add_option("--worker-timeout", v.router.worker_timeout, "evict a worker silent this long, seconds")
      ->check(CLI::Range(0.01, 3600.0))->capture_default_str();
  c.router->add_option("--request-timeout", v.router.request_timeout, "longest a request waits for decode KV blocks, seconds")
      ->check(CLI::Range(0.01, 3600.0))->capture_default_str();

  c.worker = app.add_subcommand("worker", "lab 07: a prefill or decode worker");
  c.worker->add_option("--role", v.role, "prefill, decode, or both (colocated: prefills the requests it decodes)")
      ->required()
      ->check(CLI::IsMember({"prefill", "decode", "both"}));
  auto* router = c.worker->add_option("--router", v.worker.router, "the router's endpoint, tcp://host:port");
  c.worker->add_option("--router-file", v.worker.router_file, "read the router's endpoint from this file")->excludes(router);
  c.worker->add_option("--preset", v.worker.preset, "model shape with synthetic weights")->capture_default_str();
  c.worker->add_option("--model", v.worker.model_dir, "Hugging Face model folder instead of a preset");
  c.worker->add_option("--weights-seed", v.worker.weights_seed, "seed of synthetic weights")->capture_default_str();
  c.worker->add_option("--threads", v.worker.threads, "CPU threads, 0 = all cores")->check(CLI::Range(0, 1024))->capture_default_str();
  c.worker->add_flag("--deterministic", v.worker.deterministic, "batch-invariant reductions");
  c.worker->add_option("--num-blocks", v.worker.num_blocks, "KV blocks in this worker's pool")
      ->check(CLI::Range(1, 1 << 24))->capture_default_str();
  c.worker->add_option("--block-size", v.worker.block_size, "tokens per KV block")->check(CLI::Range(1, 4096))->capture_default_str();
  c.worker->add_option("--max-num-seqs", v.worker.max_num_seqs, "most requests in one engine step")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  c.worker->add_option("--max-num-batched-tokens", v.worker.max_num_batched_tokens,
                       "most tokens in one engine step (a whole prompt must fit)")
      ->check(CLI::Range(1, 1 << 24))->capture_default_str();
  c.worker->add_option("--kv-transfer", v.mode, "write (prefill puts), read (decode gets) or send (tagged send/recv)")
      ->check(CLI::IsMember({"write", "read", "send"}))->capture_default_str();
  c.worker->add_flag("--layerwise", v.worker.layerwise,
                     "prefill: send each layer's KV as soon as it is computed, while later layers compute (write mode)");
  c.worker->add_option("--link", v.worker.link, "emulated link: ib-hdr, ib-ndr, roce-100g, nvlink or none")->capture_default_str();
  c.worker->add_option("--link-model", v.worker.link_model, "preset whose KV the pacing stands in for")->capture_default_str();
  c.worker->add_option("--kv-timeout", v.worker.kv_timeout, "longest wait for a request's KV, seconds")
      ->check(CLI::Range(0.01, 3600.0))->capture_default_str();
  c.worker->add_option("--router-timeout", v.worker.router_timeout, "exit after this long without a word from the router")
      ->check(CLI::Range(0.01, 3600.0))->capture_default_str();
  return c;
}

int DisaggCommands::run() const {
  Values& v = values();
  if (router->parsed()) {
    disagg::run_router(v.router);
    return 0;
  }
  if (worker->parsed()) {
    v.worker.mode = disagg::parse_transfer_mode(v.mode, "--kv-transfer");
    v.worker.role = disagg::parse_worker_role(v.role, "--role");
    const disagg::WorkerSummary s = disagg::run_worker(v.worker);
    std::cerr << "servelab worker (" << v.role << "): " << s.requests_served << " requests served, "
              << s.blocks_in_use << " of " << s.num_blocks << " KV blocks still held at exit\n";
    return s.blocks_in_use == 0 ? 0 : 2;  // 2: requests were in flight when it stopped
  }
  return -1;
}

}  // namespace servelab
