// SPDX-License-Identifier: MIT
// The whole server stack on a free loopback port, with the tiny chat fixture
// (tests/fixtures/tokenizer/qwen2-tiny-chat), for the server tests and the hostile-client tests.
#pragma once

#include <httplib.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "http/http_server.h"
#include "model/model.h"
#include "serve/engine.h"
#include "model/pretrained.h"

namespace servelab {

inline const std::string kChatModel = std::string(SERVELAB_FIXTURES_DIR) + "/tokenizer/qwen2-tiny-chat";

inline std::unique_ptr<Model> load_chat_model() {
  ModelOptions options;
  options.num_threads = 1;
  options.deterministic = true;  // a request's tokens must not depend on who shares its batch
  return Model::from_pretrained(kChatModel, options);
}

// The whole stack on a free loopback port.
struct LiveServer {
  explicit LiveServer(ServerConfig server_config = {}, EngineConfig engine_config = {})
      : model(load_chat_model()), tokenizer(load_tokenizer(kChatModel)), engine(*model, engine_config), loop(engine) {
    ServedModel served;
    served.name = "tiny-chat";
    served.vocab_size = model->config().vocab_size;
    served.max_model_len = engine.config().max_model_len;
    served.tokenizer = &tokenizer;
    served.chat_template = load_chat_template(kChatModel);
    served.stop_token_ids = load_stop_token_ids(kChatModel, tokenizer);
    server_config.port = 0;
    server.emplace(loop, served, server_config);
    port = server->start();
  }
  ~LiveServer() {
    loop.shutdown();
    server->stop();
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30);
    return c;
  }
  httplib::Result post(const std::string& path, const std::string& body, const httplib::Headers& headers = {}) const {
    return client().Post(path.c_str(), headers, body, "application/json");
  }
  // Waits (at most 10 s) until the engine holds no request; true when every block is back in the pool.
  bool all_blocks_returned() const {
    for (int i = 0; i < 200; ++i) {
      const EngineLoopStats s = loop.stats();
      if (s.num_requests == 0 && s.num_pending == 0) return s.num_free_blocks == s.num_blocks;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
  Engine engine;
  EngineLoop loop;
  std::optional<OpenAIServer> server;
  int port = 0;
};

}  // namespace servelab
