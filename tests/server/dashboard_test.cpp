// SPDX-License-Identifier: MIT
// The live page (http/dashboard.h) on a real server over loopback: the page is served,
// the event stream carries step records with the block pool, a viewer that goes away
// ends its stream (no viewer left behind) and the engine loop goes on, and a viewer that
// never reads does not slow the engine.
#include <catch2/catch.hpp>

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "http/dashboard.h"
#include "live_server.h"

using namespace servelab;
using namespace std::chrono_literals;

namespace {

/// A server whose engine has the dashboard attached before its loop starts.
struct DashboardServer {
  explicit DashboardServer(Dashboard::Limits limits = {})
      : model(load_chat_model()), engine(*model, EngineConfig{}), dashboard(limits) {
    engine.add_observer(&dashboard);
    loop.emplace(engine);
    ServedModel served;
    served.name = "tiny-chat";
    served.vocab_size = model->config().vocab_size;
    served.max_model_len = engine.config().max_model_len;
    ServerConfig config;
    config.port = 0;
    config.dashboard = &dashboard;
    server.emplace(*loop, served, config);
    port = server->start();
  }
  ~DashboardServer() {
    loop->shutdown();
    dashboard.close();
    server->stop();
  }
  /// A completion of @p max_tokens tokens after a token-id prompt; true when it came back whole.
  bool complete(int max_tokens) const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60);
    const auto res = c.Post("/v1/completions",
                            R"({"model":"tiny-chat","prompt":[1,2,3,4,5,6,7,8],"max_tokens":)" +
                                std::to_string(max_tokens) + R"(,"ignore_eos":true})",
                            "application/json");
    return res && res->status == 200;
  }
  /// Waits (at most 10 s) until @p n viewers are connected.
  bool viewers_become(int n) const {
    for (int i = 0; i < 200 && dashboard.num_viewers() != n; ++i) std::this_thread::sleep_for(50ms);
    return dashboard.num_viewers() == n;
  }

  std::unique_ptr<Model> model;
  Engine engine;
  Dashboard dashboard;
  std::optional<EngineLoop> loop;
  std::optional<OpenAIServer> server;
  int port = 0;
};

}  // namespace

TEST_CASE("dashboard: the page is served, self-contained", "[dashboard]") {
  DashboardServer s;
  httplib::Client c("127.0.0.1", s.port);
  const auto res = c.Get("/dashboard");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->get_header_value("Content-Type").starts_with("text/html"));
  CHECK(res->body.find("/dashboard/events") != std::string::npos);
  CHECK(res->body.find("<script src") == std::string::npos);  // nothing fetched from elsewhere
  CHECK(res->body.find("http://") == std::string::npos);
  CHECK(res->body.find("https://") == std::string::npos);
}

TEST_CASE("dashboard: a viewer that disconnects ends its stream and the loop goes on", "[dashboard]") {
  DashboardServer s;
  std::string got;
  std::thread viewer([&] {
    httplib::Client c("127.0.0.1", s.port);
    c.set_read_timeout(30);
    // Read until the first batch of records, then cancel: the client closes the connection.
    c.Get("/dashboard/events", [&](const char* data, std::size_t n) {
      got.append(data, n);
      return got.find("\"step\":") == std::string::npos;
    });
  });
  REQUIRE(s.viewers_become(1));
  CHECK(s.complete(32));
  viewer.join();
  CHECK(got.starts_with("data: {\"dropped\":"));
  CHECK(got.find("\"nb\":") != std::string::npos);
  CHECK(s.viewers_become(0));  // the server noticed at its next write and let the viewer go
  CHECK(s.complete(8));        // and the engine loop still serves
  CHECK(s.engine.kv_cache_manager().block_pool().num_free_blocks() == s.engine.num_blocks());
}

TEST_CASE("dashboard: a viewer that never reads does not stall the engine", "[dashboard]") {
  DashboardServer s(Dashboard::Limits{.max_viewers = 2, .queue_records = 8});
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  int small = 4096;  // a tiny receive buffer: the server's writes to it block early
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(s.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string get = "GET /dashboard/events HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(::send(fd, get.data(), get.size(), 0) == static_cast<ssize_t>(get.size()));
  REQUIRE(s.viewers_become(1));
  for (int i = 0; i < 3; ++i) CHECK(s.complete(64));  // served while the viewer reads nothing
  ::close(fd);
  CHECK(s.viewers_become(0));
}

TEST_CASE("dashboard: more viewers than the limit get 503, and close() ends the streams", "[dashboard]") {
  DashboardServer s(Dashboard::Limits{.max_viewers = 1, .queue_records = 8});
  std::atomic<bool> ended{false};
  std::thread first([&] {
    httplib::Client c("127.0.0.1", s.port);
    c.set_read_timeout(30);
    c.Get("/dashboard/events", [&](const char*, std::size_t) { return true; });
    ended = true;
  });
  REQUIRE(s.viewers_become(1));
  httplib::Client c("127.0.0.1", s.port);
  const auto second = c.Get("/dashboard/events");
  REQUIRE(second);
  CHECK(second->status == 503);
  s.dashboard.close();
  first.join();  // the stream ended by itself: join returns
  CHECK(ended);
}
