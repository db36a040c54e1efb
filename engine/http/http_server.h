// SPDX-License-Identifier: MIT
/**
 * @file http_server.h
 * @brief The OpenAI-compatible HTTP front end (what `vllm serve` puts in
 *        front of its engine), on cpp-httplib.
 * @verbatim
 *  POST /v1/completions        prompt (text or token ids) -> text   } stream: server-sent events,
 *  POST /v1/chat/completions   messages -> chat template -> reply    }   data: {chunk} ... data: [DONE]
 *  GET  /v1/models             the one served model
 *  GET  /health                200 while serving
 *  GET  /metrics               Prometheus text (http/prometheus.h)
 *  GET  /dashboard             the live page of the scheduler and KV blocks (http/dashboard.h), when configured
 * @endverbatim
 * Each connection runs on one of cpp-httplib's handler threads, at most
 * --max-connections at once (more get 503), through a stream of the server's
 * own that bounds what cpp-httplib 0.11 leaves open: a deadline for each whole
 * request, a byte budget that holds for chunked bodies, pipelined requests
 * kept in one buffer, TCP_NODELAY, and a stop that cuts idle connections. A handler
 * checks the request (http/openai_protocol.h), tokenizes it, hands it to
 * the engine loop (http/engine_loop.h) and writes tokens as they arrive.
 * A streaming client that goes away is noticed at the next write (or when
 * cpp-httplib drops the connection) and its request is aborted, which frees
 * its KV blocks before the next step.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/engine_loop.h"
#include "http/openai_protocol.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace servelab {

class Dashboard;

/// How the server listens (vLLM's flag names).
struct ServerConfig {
  std::string host = "127.0.0.1";        ///< --host: loopback unless asked
  int port = 8000;                       ///< --port: 0 = any free port (start() returns it)
  std::string api_key;                   ///< --api-key: when set, /v1/* needs `Authorization: Bearer <key>`
  std::size_t max_body_bytes = 1 << 20;  ///< larger request bodies get 413
  int handler_threads = 128;  ///< --max-connections: connections served at once (each holds a thread); more get 503
  double request_read_timeout_s =
      10;  ///< --request-read-timeout: a whole request (headers and body) must arrive within it, seconds
  long stream_interval_us = 0;     ///< --stream-interval-us: how long a reply's tokens wait after a write (SseWriter)
  Dashboard* dashboard = nullptr;  ///< serves GET /dashboard and its event stream when set (http/dashboard.h); borrowed
};

/// What the server knows about the model besides the engine.
struct ServedModel {
  std::string name;                           ///< --served-model-name: what `model` must say
  int vocab_size = 0;                         ///< token ids in a prompt lie in [0, vocab_size)
  int max_model_len = 0;                      ///< prompt + max_tokens limit, tokens
  const Tokenizer* tokenizer = nullptr;       ///< null: a synthetic preset, prompts and replies are token ids
  std::optional<ChatTemplate> chat_template;  ///< /v1/chat/completions needs one
  std::vector<std::int32_t> stop_token_ids;   ///< end-of-sequence ids (ignored with ignore_eos)
};

/// A request body that passed every check the server makes before the engine sees it.
struct CheckedRequest {
  CompletionRequest request;  ///< the body's fields (stop strings, stream, usage) as parsed
  EngineRequest engine;       ///< tokenized: the prompt, max_tokens (defaulted to the rest of the context), sampling
};

/**
 * @brief Everything a completion or chat completion request goes through before it is submitted:
 *        parse_completion_request(), the model name, the chat template, tokenization and the context length.
 * @throws ApiError naming the field (400, or 404 for another model's name); its message may hold
 *         bytes of the body (the server escapes them, error_object()).
 */
CheckedRequest check_request(const std::string& body, Endpoint endpoint, const ServedModel& model);

/// The HTTP server. Serves until stop(); the engine loop and the tokenizer must outlive it.
class OpenAIServer {
 public:
  /// Sets up the routes; listens nothing yet.
  OpenAIServer(EngineLoop& loop, ServedModel model, ServerConfig config);
  /// stop().
  ~OpenAIServer();
  OpenAIServer(const OpenAIServer&) = delete;
  OpenAIServer& operator=(const OpenAIServer&) = delete;

  /**
   * @brief Binds and starts serving on a thread of its own.
   * @return the port it listens on (the chosen one when the config says 0).
   * @throws Error naming --host and --port when the address cannot be bound.
   */
  int start();
  /// Stops accepting connections, closes idle and half-sent ones, and waits for the handlers.
  /// Streams still open end when the engine loop aborts them.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // keeps cpp-httplib out of this header
};

}  // namespace servelab
