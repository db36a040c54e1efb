// SPDX-License-Identifier: MIT
// The SSE writer on a socket pair: HTTP chunk framing (the last chunk too), events that wait for a
// slow reader coalesced, a stream interval's held events, a reader that stops reading or closes dropped,
// and stop() ending every stream.
#include "http/sse_writer.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <deque>
#include <future>
#include <initializer_list>
#include <mutex>
#include <string>

#include "core/error.h"

using namespace servelab;
using namespace std::chrono_literals;

namespace {

// Events the test hands over one at a time; "" as an event ends the reply.
class ScriptedSource final : public SseSource {
 public:
  /// Hands over @p events at once: the writer sees all or none of them.
  void push(std::initializer_list<std::string> events) {
    std::lock_guard lock(mutex_);
    events_.insert(events_.end(), events);
  }
  std::string take_events(bool& ended) override {
    std::lock_guard lock(mutex_);
    std::string out;
    while (!events_.empty()) {
      if (events_.front().empty()) {
        ended = true;
        events_.clear();
        break;
      }
      out += events_.front();
      events_.pop_front();
    }
    return out;
  }

 private:
  std::mutex mutex_;
  std::deque<std::string> events_;
};

struct SocketPair {
  int server = -1, client = -1;
  SocketPair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    server = fds[0], client = fds[1];
  }
  ~SocketPair() {
    if (server >= 0) ::close(server);
    if (client >= 0) ::close(client);
  }
  // Reads what arrives within @p wait after the first byte.
  std::string read_for(std::chrono::milliseconds wait) const {
    std::string got;
    char buf[65536];
    pollfd p{client, POLLIN, 0};
    while (::poll(&p, 1, static_cast<int>(wait.count())) > 0) {
      const ssize_t n = ::recv(client, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
  }
  // Reads until @p text has arrived, or until @p deadline has passed.
  std::string read_until(const std::string& text, std::chrono::milliseconds deadline) const {
    std::string got;
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (got.find(text) == std::string::npos && std::chrono::steady_clock::now() < until) got += read_for(10ms);
    return got;
  }
};

// Undoes HTTP/1.1 chunked framing; REQUIREs that every chunk is well formed and that nothing follows
// the last (zero-length) chunk; @p ended says whether that chunk came.
std::string unchunk(const std::string& wire, int& chunks, bool& ended) {
  std::string body;
  std::size_t at = 0;
  chunks = 0;
  ended = false;
  while (at < wire.size()) {
    REQUIRE_FALSE(ended);
    const std::size_t eol = wire.find("\r\n", at);
    REQUIRE(eol != std::string::npos);
    const std::size_t len = std::stoul(wire.substr(at, eol - at), nullptr, 16);
    REQUIRE(wire.substr(eol + 2 + len, 2) == "\r\n");
    if (len == 0) {  // the last chunk, no trailers
      ended = true;
      at = eol + 4;
      continue;
    }
    body += wire.substr(eol + 2, len);
    at = eol + 2 + len + 2;
    ++chunks;
  }
  return body;
}

}  // namespace

TEST_CASE("the SSE writer sends each step's events as one HTTP chunk and returns true once all is written",
          "[server]") {
  SseWriter writer;
  SocketPair sockets;
  ScriptedSource source;
  source.push({"data: {\"a\":1}\n\n"});
  auto done = std::async(std::launch::async, [&] { return writer.stream(sockets.server, source); });
  std::string wire = sockets.read_for(200ms);
  source.push({"data: {\"b\":2}\n\n", "data: {\"c\":3}\n\n"});
  writer.notify();
  wire += sockets.read_for(200ms);
  source.push({"data: [DONE]\n\n", ""});
  writer.notify();
  REQUIRE(done.wait_for(2s) == std::future_status::ready);
  CHECK(done.get());
  wire += sockets.read_for(50ms);
  int chunks = 0;
  bool ended = false;
  CHECK(unchunk(wire, chunks, ended) == "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: {\"c\":3}\n\ndata: [DONE]\n\n");
  CHECK(chunks == 3);  // b and c arrived in one step: one chunk
  CHECK(ended);        // the body's last chunk went with the last events (the handler writes nothing more)
}

TEST_CASE("with a stream interval, the SSE writer holds a reply's middle events and sends them as one chunk",
          "[server]") {
  // Long enough that a slow machine's scheduling delays (tens of ms) cannot move an event across it.
  constexpr auto interval = 600ms;
  SseWriter writer(5s, interval);
  SocketPair sockets;
  ScriptedSource source;
  source.push({"data: a\n\n"});
  auto done = std::async(std::launch::async, [&] { return writer.stream(sockets.server, source); });
  std::string wire = sockets.read_for(100ms);
  CHECK(wire.find("data: a") != std::string::npos);  // the first events never wait
  source.push({"data: b\n\n"});
  writer.notify();  // nothing written past a first event yet: goes at once, and the interval starts
  wire += sockets.read_for(100ms);
  CHECK(wire.find("data: b") != std::string::npos);
  source.push({"data: c\n\n"});
  writer.notify();
  CHECK(sockets.read_for(100ms).empty());  // held: the interval has not passed
  source.push({"data: d\n\n"});
  writer.notify();
  // No step comes: the writer's own timeout sends c and d together, at most two intervals after b.
  wire += sockets.read_until("data: d", 3 * interval);
  CHECK(wire.find("data: d") != std::string::npos);
  source.push({"data: e\n\n", ""});
  const auto last = std::chrono::steady_clock::now();
  writer.notify();
  REQUIRE(done.wait_for(2s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - last < interval / 2);  // the last events never wait
  CHECK(done.get());
  wire += sockets.read_for(50ms);
  int chunks = 0;
  bool ended = false;
  CHECK(unchunk(wire, chunks, ended) == "data: a\n\ndata: b\n\ndata: c\n\ndata: d\n\ndata: e\n\n");
  CHECK(chunks == 4);  // a | b | c d | e
  CHECK(ended);
}

TEST_CASE("the SSE writer refuses a stream interval outside [0, 1 s], naming the flag", "[server]") {
  CHECK_THROWS_WITH(SseWriter(5s, 1001ms),
                    Catch::Contains("--stream-interval-us must be in [0, 1000000], got 1001000"));
  CHECK_THROWS_WITH(SseWriter(5s, -1us), Catch::Contains("--stream-interval-us"));
  CHECK_NOTHROW(SseWriter(5s, 1s));
}

TEST_CASE("the SSE writer drops a reader that stops reading, and one that closes, with false", "[server]") {
  SseWriter writer(300ms);
  SECTION("a reader that reads nothing") {
    SocketPair sockets;
    ScriptedSource source;
    const std::string big(1 << 20, 'x');  // more than the socket buffers hold
    source.push({"data: " + big + "\n\n", "data: " + big + "\n\n", "data: " + big + "\n\n"});
    const auto start = std::chrono::steady_clock::now();
    auto done = std::async(std::launch::async, [&] { return writer.stream(sockets.server, source); });
    REQUIRE(done.wait_for(3s) == std::future_status::ready);
    CHECK_FALSE(done.get());
    CHECK(std::chrono::steady_clock::now() - start >= 300ms);  // dropped for the stall, not at once
  }
  SECTION("a reader that closes") {
    SocketPair sockets;
    ScriptedSource source;
    ::close(sockets.client);
    sockets.client = -1;
    source.push({"data: {}\n\n"});
    auto done = std::async(std::launch::async, [&] { return writer.stream(sockets.server, source); });
    REQUIRE(done.wait_for(2s) == std::future_status::ready);
    CHECK_FALSE(done.get());
  }
}

TEST_CASE("stopping the SSE writer ends a stream in progress and refuses later ones", "[server]") {
  SseWriter writer;
  SocketPair sockets;
  ScriptedSource source;
  source.push({"data: {}\n\n"});  // the reply never ends by itself
  auto done = std::async(std::launch::async, [&] { return writer.stream(sockets.server, source); });
  CHECK_FALSE(sockets.read_for(200ms).empty());
  CHECK(done.wait_for(100ms) == std::future_status::timeout);
  writer.stop();
  REQUIRE(done.wait_for(2s) == std::future_status::ready);
  CHECK_FALSE(done.get());
  ScriptedSource later;
  later.push({""});
  CHECK_FALSE(writer.stream(sockets.server, later));
}
