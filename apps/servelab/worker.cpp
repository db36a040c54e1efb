// SPDX-License-Identifier: MIT
#include <iostream>
#include <memory>
#include <string>

#include "command.h"
#include "disagg/control.h"
#include "disagg/worker.h"

namespace servelab::cli {

namespace {

struct WorkerArgs {
  disagg::WorkerConfig worker;
  std::string role;
  std::string mode = "write";
  std::string key_file;
};

}  // namespace

Command add_worker_command(CLI::App& app) {
  auto a = std::make_shared<WorkerArgs>();
  disagg::WorkerConfig& w = a->worker;
  CLI::App* worker = app.add_subcommand("worker", "lab 07: a prefill or decode worker");
  worker->add_option("--role", a->role, "prefill, decode, or both (colocated: prefills the requests it decodes)")
      ->required()
      ->check(CLI::IsMember({"prefill", "decode", "both"}));
  auto* router = worker->add_option("--router", w.router, "the router's endpoint, tcp://host:port");
  worker->add_option("--router-file", w.router_file, "read the router's endpoint from this file")->excludes(router);
  add_model_flags(*worker, w.model);
  worker->add_option("--num-blocks", w.num_blocks, "KV blocks in this worker's pool")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  worker->add_option("--block-size", w.block_size, "tokens per KV block")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  worker->add_option("--max-num-seqs", w.max_num_seqs, "most requests in one engine step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  worker
      ->add_option("--max-num-batched-tokens", w.max_num_batched_tokens,
                   "most tokens in one engine step (a whole prompt must fit, unless --enable-chunked-prefill)")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  worker->add_flag("--enable-chunked-prefill", w.enable_chunked_prefill, "split long prompts over steps (lab 06)");
  worker->add_option("--kv-transfer", a->mode, "write (prefill puts), read (decode gets) or send (tagged send/recv)")
      ->check(CLI::IsMember({"write", "read", "send"}))
      ->capture_default_str();
  worker->add_flag("--layerwise", w.layerwise,
                   "prefill: send each layer's KV as soon as it is computed, while later layers compute (write mode)");
  worker->add_option("--link", w.link, "emulated link: ib-hdr, ib-ndr, roce-100g, nvlink or none")
      ->capture_default_str();
  worker->add_option("--link-model", w.link_model, "preset whose KV the pacing stands in for")->capture_default_str();
  worker->add_option("--kv-timeout", w.kv_timeout, "longest wait for a request's KV, seconds")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  worker->add_option("--router-timeout", w.router_timeout, "exit after this long without a word from the router")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  worker->add_option("--cluster-key-file", a->key_file, "a file holding the fleet's shared key (as the router's)");
  return {worker, [a] {
            if (!a->key_file.empty())
              a->worker.cluster_key = disagg::read_cluster_key(a->key_file, "--cluster-key-file");
            a->worker.mode = disagg::parse_transfer_mode(a->mode, "--kv-transfer");
            a->worker.role = disagg::parse_worker_role(a->role, "--role");
            const disagg::WorkerSummary s = disagg::run_worker(a->worker);
            std::cerr << "servelab worker (" << a->role << "): " << s.requests_served << " requests served, "
                      << s.blocks_in_use << " of " << s.num_blocks << " KV blocks still held at exit, "
                      << s.malformed_messages << " malformed messages dropped\n";
            return s.blocks_in_use == 0 ? 0 : 2;  // 2: requests were in flight when it stopped
          }};
}

}  // namespace servelab::cli
