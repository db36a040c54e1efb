// SPDX-License-Identifier: MIT
// Hostile and careless HTTP clients against the server, on raw loopback sockets: each test
// is one way a client used to crash, hang or starve `servelab serve`, and checks that the
// server answers clearly and keeps serving. Every wait has a deadline, so a regression
// fails the test rather than hanging it; none of the deadlines is a speed claim.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/json.h"
#include "http/openai_protocol.h"
#include "live_server.h"
#include "loadgen/bench_client.h"

using namespace servelab;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// One client connection on a raw socket: what it sends goes out byte for byte.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~RawClient() { ::close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  void send(const std::string& bytes) const {
    REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  }
  // False when the server has closed the connection.
  bool try_send(const std::string& bytes) const {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // Everything received until the server closes, @p enough is received, or @p deadline passes.
  std::string receive(std::chrono::milliseconds deadline, const std::string& enough = {}, int copies = 1) const {
    std::string got;
    const auto until = std::chrono::steady_clock::now() + deadline;
    for (;;) {
      if (!enough.empty() && count(got, enough) >= copies) return got;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return got;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return got;
      char buf[8192];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        return got;
      }
      got.append(buf, static_cast<std::size_t>(n));
    }
  }
  bool closed() const { return closed_; }
  int local_port() const {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    return ntohs(addr.sin_port);
  }

  static int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (std::size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) ++n;
    return n;
  }

 private:
  int fd_;
  mutable bool closed_ = false;
};

std::string post(const std::string& path, const std::string& body,
                 const std::string& content_type = "application/json") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

int status_of(const std::string& response) {
  REQUIRE(response.starts_with("HTTP/1.1 "));
  return std::stoi(response.substr(9, 3));
}

json body_of(const std::string& response) {
  const std::size_t start = response.find("\r\n\r\n");
  REQUIRE(start != std::string::npos);
  return json::parse(response.substr(start + 4));
}

bool healthy(const LiveServer& s) {
  const auto res = s.client().Get("/health");
  return res && res->status == 200;
}

}  // namespace

TEST_CASE("bytes that are not UTF-8 in a path or a body get a 4xx, and the server lives", "[hostile]") {
  ServerConfig config;
  config.api_key = "k";  // the path is refused before the key is checked, as /%FF is outside /v1/
  LiveServer s(config);
  const std::vector<std::string> attacks = {
      "GET /%FF HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", post("/v1/completions", "{\"prompt\": \"a\xff\"}"),
      post("/v1/completions", "{\"prompt\": \xec\xba\x90\xec\x8b\x9c}"),  // an unquoted non-ASCII token
  };
  for (const std::string& attack : attacks) {
    RawClient c(s.port);
    c.send(attack);
    const std::string response = c.receive(5s, "}}");
    INFO(response);
    const int status = status_of(response);
    CHECK((status == 400 || status == 401 || status == 404));
    CHECK(body_of(response)["error"]["message"].is_string());
  }
  CHECK(healthy(s));
}

TEST_CASE("more slow clients than the connection cap get 503 and are cut at the read deadline", "[hostile]") {
  ServerConfig config;
  config.handler_threads = 4;
  config.request_read_timeout_s = 1;
  LiveServer s(config);
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 6; ++i) {
    slow.push_back(std::make_unique<RawClient>(s.port));
    slow.back()->send("GET /health HTTP/1.1\r\nHost: x\r\n");  // and never the blank line
  }
  // Beyond the cap a client is told at once, not queued behind the slow ones.
  RawClient late(s.port);
  late.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string refused = late.receive(5s, "}}");
  const int status = status_of(refused);
  CHECK((status == 503 || status == 200));
  if (status == 503)
    CHECK(body_of(refused)["error"]["message"].get<std::string>().find("--max-connections") != std::string::npos);
  // The slow ones are cut at the deadline, which frees their threads for everyone else.
  for (auto& c : slow) {
    c->receive(5s);
    CHECK(c->closed());
  }
  CHECK(healthy(s));
}

TEST_CASE("stopping the server ends connections that trickle header bytes", "[hostile]") {
  ServerConfig config;
  config.request_read_timeout_s = 60;  // the stop, not the deadline, must end them
  auto s = std::make_unique<LiveServer>(config);
  RawClient trickle(s->port), idle(s->port);
  trickle.send("GET /health HTTP/1.1\r\nHo");
  std::this_thread::sleep_for(100ms);  // both are being read by handler threads
  auto stopped = std::async(std::launch::async, [&] { s.reset(); });
  REQUIRE(stopped.wait_for(10s) == std::future_status::ready);
  trickle.receive(1s);
  CHECK(trickle.closed());
}

TEST_CASE("a chunked body is held to --max-body-bytes on every path", "[hostile]") {
  ServerConfig config;
  config.max_body_bytes = 4096;
  config.api_key = "k";
  LiveServer s(config);
  const std::string chunk = std::string("1000\r\n") + std::string(4096, 'a') + "\r\n";
  for (const std::string path : {"/v1/completions", "/no/such/path"}) {
    RawClient c(s.port);
    c.send("POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nTransfer-Encoding: chunked\r\n\r\n");
    std::string response;
    // Sends up to 128 KiB; the server must refuse before it has all of it.
    for (int i = 0; i < 32 && response.empty() && c.try_send(chunk); ++i) response = c.receive(50ms);
    if (response.empty()) response = c.receive(5s, "}}");
    INFO(path << ": " << response);
    CHECK(status_of(response) == 413);
  }
  // One whole chunk a little over the limit, within what the wire allows for chunk framing.
  RawClient c(s.port);
  c.send(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nTransfer-Encoding: "
      "chunked\r\n\r\n1100\r\n" +
      std::string(4352, 'a') + "\r\n0\r\n\r\n");
  CHECK(status_of(c.receive(5s, "}}")) == 413);
  CHECK(healthy(s));
}

TEST_CASE("pipelined requests on one connection are all answered, in order", "[hostile]") {
  LiveServer s;
  RawClient c(s.port);
  std::string three;
  for (const char* path : {"/health", "/v1/models", "/health"})
    three += std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
  c.send(three);  // in one write, before any answer
  const std::string got = c.receive(5s, "HTTP/1.1 200", 3);
  CHECK(RawClient::count(got, "HTTP/1.1 200") == 3);
  CHECK(got.find("tiny-chat") > got.find("HTTP/1.1 200"));
}

TEST_CASE("responses go out with TCP_NODELAY (no Nagle stall on keep-alive)", "[hostile]") {
  LiveServer s;
  RawClient c(s.port);
  c.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE(status_of(c.receive(5s, "\r\n\r\n")) == 200);
  // The server's end of this connection is a descriptor of this process: the one whose peer is our port.
  int nodelay = -1;
  for (int fd = 0; fd < 4096 && nodelay < 0; ++fd) {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 || peer.sin_family != AF_INET ||
        ntohs(peer.sin_port) != c.local_port())
      continue;
    int on = 0;
    socklen_t on_len = sizeof on;
    REQUIRE(::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &on_len) == 0);
    nodelay = on;
  }
  CHECK(nodelay > 0);
}

TEST_CASE("a form-urlencoded body over 8 KiB is told to send JSON, not that it passed --max-body-bytes", "[hostile]") {
  LiveServer s;
  RawClient c(s.port);
  c.send(
      post("/v1/completions", "{\"prompt\": \"" + std::string(9000, 'a') + "\"}", "application/x-www-form-urlencoded"));
  const std::string response = c.receive(5s, "}}");
  REQUIRE(status_of(response) == 413);
  const std::string message = body_of(response)["error"]["message"];
  CHECK(message.find("application/json") != std::string::npos);
  CHECK(message.find("1048576") == std::string::npos);
}

TEST_CASE("top_p too small for a float is refused naming top_p", "[hostile]") {
  try {
    parse_completion_request(R"({"prompt": [1], "top_p": 1e-300})", Endpoint::completions, 100);
    FAIL("accepted");
  } catch (const ApiError& e) {
    CHECK(e.param == "top_p");
    const std::string message = e.what();
    CHECK(message.find("'top_p' must be in (0, 1]") != std::string::npos);
    CHECK(message.find("0 as the 32-bit float the engine samples with") != std::string::npos);
  }
}

TEST_CASE("bench serve reports its failed requests and refuses a timeout <= 0", "[hostile]") {
  ServerConfig config;
  config.api_key = "right";
  LiveServer s(config);
  BenchConfig bench;
  bench.port = s.port;
  bench.api_key = "wrong";
  std::vector<WorkloadRequest> workload(3);
  for (auto& w : workload) w.prompt_ids = {1, 2, 3}, w.max_tokens = 2;
  const BenchResult result = run_bench(workload, bench);
  const BenchRequestResult* failed = first_failure(result);
  REQUIRE(failed != nullptr);
  CHECK(failed->error.find("HTTP 401") != std::string::npos);
  for (const double timeout : {0.0, -1.0}) {
    bench.timeout_s = timeout;
    CHECK_THROWS_WITH(run_bench(workload, bench), Catch::Contains("--timeout"));
  }
}

TEST_CASE("bench serve gives up on a peer that accepts and never answers, after --timeout", "[hostile]") {
  // A listening socket nobody accepts on: the kernel completes the handshake and takes the request, and no
  // byte ever comes back. The client's own timer must end each request, not wait forever.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 16) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  BenchConfig bench;
  bench.port = ntohs(addr.sin_port);
  bench.timeout_s = 0.3;
  std::vector<WorkloadRequest> workload(3);
  for (auto& w : workload) w.prompt_ids = {1, 2, 3}, w.max_tokens = 2;
  const auto start = std::chrono::steady_clock::now();
  const BenchResult result = run_bench(workload, bench);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(fd);
  for (const BenchRequestResult& r : result.requests) {
    CHECK_FALSE(r.success);
    CHECK_THAT(r.error, Catch::Contains("--timeout"));
  }
  CHECK(seconds >= 0.3);
  CHECK(seconds < 10);  // generous for a loaded machine; without the timer it would never end
}

TEST_CASE("a FIFO or a device given as a file is refused by name, without blocking", "[hostile]") {
  const std::string fifo = "/tmp/servelab_hostile_fifo_" + std::to_string(::getpid());
  ::unlink(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A read that blocked would never return: it runs on a thread of its own, and the test waits 5 s at most.
  const auto refusal = [](const std::string& path) {
    auto done = std::make_shared<std::promise<std::string>>();
    std::thread([path, done] {
      try {
        read_json_file(path, "a Hugging Face config.json");
        done->set_value("accepted");
      } catch (const Error& e) {
        done->set_value(e.what());
      }
    }).detach();
    auto answer = done->get_future();
    return answer.wait_for(5s) == std::future_status::ready ? answer.get() : std::string("blocked");
  };
  CHECK_THAT(refusal(fifo), Catch::Contains("is a FIFO") && Catch::Contains("config.json"));
  CHECK_THAT(refusal("/dev/zero"), Catch::Contains("is a character device"));
  ::unlink(fifo.c_str());
}

namespace {

// The storm's normal request @p i: a text prompt of its own, greedy, streamed, a fixed length.
std::string storm_body(int i) {
  return json{{"prompt", "storm request " + std::to_string(i) + ": the KV cache holds"},
              {"max_tokens", 12 + i % 5},
              {"temperature", 0},
              {"ignore_eos", true},
              {"stream", true}}
      .dump();
}

// The text of a whole streamed reply (every chunk's choices[0].text), or "" when it did not end in [DONE].
std::string streamed_text(const std::string& sse) {
  if (sse.find("data: [DONE]") == std::string::npos) return "";
  std::string text;
  for (std::size_t at = sse.find("data: {"); at != std::string::npos; at = sse.find("data: {", at + 1)) {
    const std::size_t end = sse.find("\n\n", at);
    text += json::parse(sse.substr(at + 6, end - at - 6))["choices"][0]["text"].get<std::string>();
  }
  return text;
}

// What each kind of storm client did; atomics, as each kind runs on threads of its own.
struct StormCounts {
  std::atomic<long> normal{0}, normal_differed{0}, normal_failed{0}, slowloris_cut{0}, hung_up{0}, bad_json{0},
      oversize{0}, unexpected{0};
};

}  // namespace

// SERVELAB_STORM_SECONDS long (7 s unless set; the storm label runs it for 60 s): normal streams at
// temperature 0 beside clients that trickle headers, hang up mid-stream, send malformed JSON and bodies
// over --max-body-bytes, against a KV pool small enough to preempt. Then every block is free, every
// normal reply equals its quiet run's, and the server still answers.
TEST_CASE("a storm of normal, slow, vanishing and malformed clients leaves every block free and every reply unchanged",
          "[hostile][storm]") {
  const char* env = std::getenv("SERVELAB_STORM_SECONDS");
  const double seconds = env ? std::stod(env) : 7;
  ServerConfig config;
  config.handler_threads = 24;
  config.request_read_timeout_s = 1;
  config.max_body_bytes = 8192;
  EngineConfig engine;
  engine.num_gpu_blocks_override = 16;  // of 16 tokens: one 256-token context, so the long streams preempt others
  LiveServer s(config, engine);
  constexpr int kPrompts = 8;
  std::vector<std::string> quiet(kPrompts);
  for (int i = 0; i < kPrompts; ++i) {
    const auto res = s.post("/v1/completions", storm_body(i));
    REQUIRE(res);
    quiet[i] = streamed_text(res->body);
    REQUIRE_FALSE(quiet[i].empty());
  }

  StormCounts n;
  std::string first_unexpected;  // written by the one thread that sends malformed bodies, read after the join
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  const auto storming = [&] { return std::chrono::steady_clock::now() < until; };
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t)  // normal streams, each checked against the quiet run
    clients.emplace_back([&, t] {
      for (int i = t; storming(); i += 4) {
        const auto res = s.post("/v1/completions", storm_body(i % kPrompts));
        ++n.normal;
        if (!res || res->status != 200)
          ++n.normal_failed;
        else if (streamed_text(res->body) != quiet[i % kPrompts])
          ++n.normal_differed;
      }
    });
  for (int t = 0; t < 3; ++t)  // slowloris: a header byte every 100 ms until the read deadline cuts it
    clients.emplace_back([&] {
      while (storming()) {
        RawClient c(s.port);
        const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n";
        for (std::size_t i = 0; i < head.size() && c.try_send(head.substr(i, 1)); ++i) c.receive(100ms);
        c.receive(3s);
        n.slowloris_cut += c.closed();
      }
    });
  for (int t = 0; t < 2; ++t)  // a long stream, dropped after its first event
    clients.emplace_back([&, t] {
      for (int i = t; storming(); i += 2) {
        RawClient c(s.port);
        c.send(post("/v1/completions",
                    json{{"prompt", "gone " + std::to_string(i)}, {"max_tokens", 150}, {"stream", true}}.dump()));
        if (c.receive(10s, "data: {").find("data: {") != std::string::npos) ++n.hung_up;
      }
    });
  clients.emplace_back([&] {  // malformed bodies and bodies over --max-body-bytes, plain and chunked
    const std::vector<std::string> bad = {"{\"prompt\": ", "{\"prompt\": \"a\xff\"}", "[1, 2]",
                                          "{\"prompt\": [1], \"max_tokens\": -3}", "{\"messages\": 7}"};
    const std::string big = "{\"prompt\": \"" + std::string(9000, 'a') + "\"}";
    for (int i = 0; storming(); ++i) {
      RawClient c(s.port);
      if (i % 3 == 2) {
        std::ostringstream chunk;
        chunk << std::hex << big.size() << "\r\n" << big << "\r\n0\r\n\r\n";
        c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk.str());
      } else {
        c.send(i % 3 == 0 ? post("/v1/completions", bad[static_cast<std::size_t>(i / 3) % bad.size()])
                          : post("/v1/completions", big));
      }
      const std::string response = c.receive(5s, "}}");
      const int status = response.starts_with("HTTP/1.1 ") ? std::stoi(response.substr(9, 3)) : 0;
      if (i % 3 == 0 && status == 400)
        ++n.bad_json;
      else if (i % 3 != 0 && status == 413)
        ++n.oversize;
      else if (++n.unexpected == 1)
        first_unexpected = response.substr(0, 200);
    }
  });
  for (std::thread& c : clients) c.join();

  const auto metrics = s.client().Get("/metrics");
  REQUIRE(metrics);
  const std::size_t at = metrics->body.find("\nservelab:num_preemptions_total ");
  const std::string preemptions =
      at == std::string::npos ? "?" : metrics->body.substr(at + 32, metrics->body.find('\n', at + 1) - at - 32);
  WARN("storm of " << seconds << " s: " << n.normal << " normal streams (" << n.normal_differed << " differed, "
                   << n.normal_failed << " failed), " << n.slowloris_cut << " slowloris cut, " << n.hung_up
                   << " hung up mid-stream, " << n.bad_json << " malformed refused, " << n.oversize
                   << " oversize refused, " << n.unexpected << " unexpected answers; " << preemptions
                   << " preemptions");
  CHECK(n.normal > 0);
  CHECK(n.normal_differed == 0);
  CHECK(n.normal_failed == 0);
  INFO("first unexpected answer: " << first_unexpected);
  CHECK(n.unexpected == 0);
  CHECK(n.slowloris_cut > 0);
  CHECK(n.hung_up > 0);
  CHECK(s.all_blocks_returned());
  CHECK(healthy(s));
  const auto after = s.post("/v1/completions", storm_body(0));
  REQUIRE(after);
  CHECK(streamed_text(after->body) == quiet[0]);
}
