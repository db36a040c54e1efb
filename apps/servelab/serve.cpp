// SPDX-License-Identifier: MIT
#include "command.h"

#include <pthread.h>
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "core/error.h"
#include "cli/trace_flags.h"
#include "engine_flags.h"
#include "http/dashboard.h"
#include "http/http_server.h"
#include "model/pretrained.h"

namespace servelab::cli {

namespace {

struct ServeArgs {
  EngineFlags engine;
  ServerConfig server;
  std::string served_model_name;
  TraceFlags trace;
  long batch_wait_us = EngineLoop::kDefaultBatchWait.count();
};

int run_serve(const ServeArgs& a) {
  // SIGINT and SIGTERM are taken by sigwait() below, not by a handler: blocked before any
  // thread starts, so every thread inherits the mask and only the main thread sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::unique_ptr<Model> model = load_model(a.engine);
  const ModelConfig& c = model->config();
  ServedModel served;
  served.name = !a.served_model_name.empty() ? a.served_model_name
                : a.engine.model_dir.empty() ? a.engine.preset
                                             : a.engine.model_dir;
  served.vocab_size = c.vocab_size;
  std::optional<Tokenizer> tokenizer;
  if (!a.engine.model_dir.empty() && has_tokenizer(a.engine.model_dir)) {
    tokenizer.emplace(load_tokenizer(a.engine.model_dir));
    check(tokenizer->vocab_size() <= c.vocab_size, tokenizer->source(), ": the tokenizer has ids up to ",
          tokenizer->vocab_size() - 1, " but model ", c.name, " has vocab_size ", c.vocab_size);
    served.tokenizer = &*tokenizer;
    served.stop_token_ids = load_stop_token_ids(a.engine.model_dir, *tokenizer);
    try {
      served.chat_template = load_chat_template(a.engine.model_dir);
    } catch (const Error& e) {
      std::cerr << "servelab serve: no chat endpoint: " << e.what() << "\n";
    }
  }
  Engine engine(*model, engine_config(a.engine, c, [](const std::string& line) {
    std::cerr << "servelab serve: " << line << "\n";
  }));
  served.max_model_len = engine.config().max_model_len;
  // A KV pool that cannot hold one max_model_len sequence would refuse every request that leaves max_tokens
  // to the server: serve (and advertise) the length that fits.
  const long kv_tokens = static_cast<long>(engine.num_blocks()) * engine.config().block_size;
  if (kv_tokens < served.max_model_len) {
    std::cerr << "servelab serve: max_model_len lowered from " << served.max_model_len << " to " << kv_tokens
              << ": the KV cache holds " << engine.num_blocks() << " blocks of " << engine.config().block_size
              << " tokens (raise --kv-cache-memory or lower --max-model-len)\n";
    served.max_model_len = static_cast<int>(kv_tokens);
  }
  // Attached before the loop's thread starts: the trace is then touched by that thread alone until shutdown.
  const std::unique_ptr<ChromeTrace> trace = open_trace(a.trace);
  if (trace) trace->attach(engine, "servelab serve " + served.name);
  // The live page: records are built only while someone watches /dashboard.
  Dashboard dashboard;
  engine.add_observer(&dashboard);
  ServerConfig server_config = a.server;
  server_config.dashboard = &dashboard;
  EngineLoop loop(engine, std::chrono::microseconds(a.batch_wait_us));
  OpenAIServer server(loop, served, server_config);
  const int port = server.start();
  std::cerr << "servelab serve: model " << served.name << " (" << c.name << "), " << engine.num_blocks()
            << " KV blocks of " << engine.config().block_size << " tokens, max_model_len " << served.max_model_len
            << ", prefix caching " << (engine.config().enable_prefix_caching ? "on" : "off") << ", "
            << (served.tokenizer ? "text and token-id prompts" : "token-id prompts only (no tokenizer)")
            << (served.chat_template ? ", chat" : "") << "; the live page is /dashboard\n";
  // One line on stdout, so scripts can read the port --port 0 chose.
  // An IPv6 literal goes in brackets in a URL (RFC 3986): http://[::1]:8000.
  const bool ipv6 = a.server.host.find(':') != std::string::npos;
  std::cout << "listening on http://" << (ipv6 ? "[" + a.server.host + "]" : a.server.host) << ":" << port << std::endl;

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  std::cerr << "servelab serve: " << (signal_number == SIGINT ? "SIGINT" : "SIGTERM")
            << ": aborting in-flight requests and stopping\n";
  // Abort first: open streams then end with finish_reason "abort" and their handlers return, so stop() does not wait on them.
  loop.shutdown();
  dashboard.close();  // its streams end too, so stop() does not wait on them
  server.stop();
  const EngineLoopStats s = loop.stats();
  std::cerr << "servelab serve: stopped; " << s.num_free_blocks << " of " << s.num_blocks << " KV blocks free\n";
  if (trace) {
    trace->close();
    std::cerr << "servelab serve: trace " << trace->summary() << "\n";
  }
  return 0;
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* command =
      app.add_subcommand("serve", "serve the model over an OpenAI-compatible HTTP API (streaming, /metrics)");
  add_engine_flags(*command, a->engine);
  add_trace_flags(*command, a->trace);
  command->add_option("--host", a->server.host, "address to listen on (loopback by default)")->capture_default_str();
  command->add_option("--port", a->server.port, "port; 0 picks a free one and prints it")->capture_default_str();
  command->add_option("--api-key", a->server.api_key, "require `Authorization: Bearer KEY` on /v1/*")
      ->check(CLI::Validator(
          [](const std::string& key) {
            return key.empty() ? "empty, which would turn authentication off; give a key or omit the flag" : "";
          },
          "KEY"));
  command->add_option("--served-model-name", a->served_model_name,
                      "the name clients give as `model` (default: --model or --preset)");
  command->add_option("--max-body-bytes", a->server.max_body_bytes, "largest request body; larger ones get 413")
      ->capture_default_str();
  command
      ->add_option("--max-connections", a->server.handler_threads,
                   "connections served at once (one thread each); more get 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  command
      ->add_option("--request-read-timeout", a->server.request_read_timeout_s,
                   "seconds a client has to send a whole request (headers and body); slower ones are cut")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 3600.0));
  command
      ->add_option("--batch-wait-us", a->batch_wait_us,
                   "when a request finds the engine idle, wait until no other has arrived for this long (at most "
                   "10x, or until --max-num-seqs are waiting) so a burst is prefilled together; 0 = step at once")
      ->capture_default_str()
      ->check(CLI::Range(0L, 1000000L));
  command
      ->add_option("--stream-interval-us", a->server.stream_interval_us,
                   "hold a streamed reply's tokens until this long after the last write, then send them as one "
                   "chunk (first and last tokens never wait); 0 = every step's tokens at once")
      ->capture_default_str()
      ->check(CLI::Range(0L, 1000000L));
  return {command, [a] { return run_serve(*a); }};
}

}  // namespace servelab::cli
