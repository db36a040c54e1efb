// SPDX-License-Identifier: MIT
#include <memory>
#include <string>

#include "command.h"
#include "disagg/control.h"
#include "disagg/router.h"

namespace servelab::cli {

Command add_router_command(CLI::App& app) {
  auto c = std::make_shared<disagg::RouterConfig>();
  auto key_file = std::make_shared<std::string>();
  CLI::App* router = app.add_subcommand(
      "router", "lab 07: the control plane's hub that prefill/decode workers and clients connect to");
  router->add_option("--control", c->endpoint, "ZeroMQ endpoint to bind (port 0 = ephemeral)")->capture_default_str();
  router->add_option("--endpoint-file", c->endpoint_file, "write the bound endpoint to this file");
  router->add_option("--worker-timeout", c->worker_timeout, "evict a worker silent this long, seconds")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  router->add_option("--request-timeout", c->request_timeout, "longest a request waits for decode KV blocks, seconds")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  router->add_option("--cluster-key-file", *key_file,
                     "a file holding the fleet's shared key: every worker and client must send it");
  return {router, [c, key_file] {
            if (!key_file->empty()) c->cluster_key = disagg::read_cluster_key(*key_file, "--cluster-key-file");
            disagg::run_router(*c);
            return 0;
          }};
}

}  // namespace servelab::cli
