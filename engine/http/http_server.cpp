// SPDX-License-Identifier: MIT
#include "http/http_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>

#include "http/dashboard_routes.h"
#include "http/openai_protocol.h"
#include "http/sse_writer.h"
#include "http/text_stream.h"

namespace servelab {

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// How long a handler waits for the engine loop before it looks again (the loop notifies sooner).
constexpr auto kPollInterval = 100ms;

const char* finish_reason_name(FinishReason r) {
  return r == FinishReason::STOP ? "stop" : r == FinishReason::LENGTH ? "length" : "abort";
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {}) {
  res.status = status;
  res.set_content(error_object(status, message, param).dump(), "application/json");
}

std::string sse(const json& event) { return "data: " + event.dump() + "\n\n"; }

// One reply's state from submission to its last byte: the handler's until it streams, then the SSE writer's.
struct Reply final : SseSource {
  Reply(EngineLoop& l, std::shared_ptr<RequestStream> s, const Tokenizer* tokenizer,
        std::vector<std::string> stop_strings, ResponseHeader h, Usage u, bool with_usage)
      : loop(l),
        stream(std::move(s)),
        text(tokenizer, std::move(stop_strings)),
        header(std::move(h)),
        format(header),
        usage(u),
        include_usage(with_usage) {}

  /// Text and token ids that one chunk carries.
  struct Piece {
    std::string text;
    std::vector<std::int32_t> ids;
  };

  /// Turns @p u into pieces (one per token); true when the reply ended, with finish_reason set.
  bool take(const RequestStream::Update& u, std::vector<Piece>& pieces) {
    for (std::int32_t id : u.tokens) {
      if (text.stopped()) break;  // tokens sampled before the abort reached the engine
      pieces.push_back({text.push(id), {id}});
      ++usage.completion_tokens;
      if (text.stopped()) {
        loop.abort(*stream, FinishReason::STOP);  // frees the blocks; the reply is over whatever the engine does next
        finish_reason = "stop";
        return true;
      }
    }
    if (!u.finished) return false;
    const std::string tail = text.finish();
    if (pieces.empty()) pieces.push_back({});
    pieces.back().text += tail;
    finish_reason = text.stopped() ? "stop" : finish_reason_name(u.finish_reason);
    return true;
  }

  // The stream's news as SSE events: the first with a token carries a chat reply's role, the last the usage.
  std::string take_events(bool& ended) override {
    RequestStream::Update u;
    if (first_taken)
      u = stream->take();
    else
      u = std::move(first), first_taken = true;
    std::vector<Piece> pieces;
    ended = take(u, pieces);
    std::string out;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const bool last = ended && i + 1 == pieces.size();
      if (last || first_chunk)
        out += sse(chunk_object(header, pieces[i].text, pieces[i].ids, last ? finish_reason : "", first_chunk));
      else
        format.append_event(out, pieces[i].text, pieces[i].ids);
      first_chunk = false;
    }
    if (ended) {
      if (include_usage) out += sse(usage_chunk(header, usage));
      out += "data: [DONE]\n\n";
    }
    return out;
  }

  EngineLoop& loop;
  std::shared_ptr<RequestStream> stream;
  TextStream text;
  ResponseHeader header;
  ChunkFormat format;  // header's middle chunks, serialized once
  Usage usage;
  bool include_usage;
  RequestStream::Update first;  // what arrived with the admission, not yet sent
  std::string finish_reason;
  bool first_taken = false;  // `first` has been turned into chunks
  bool first_chunk = true;   // the next chunk is the first (a chat chunk then carries the role)
};

// cpp-httplib 0.11 listens with a backlog of 5 connections, compiled into Debian's library:
// a burst of 32 clients overflows it and some see their connection dropped before any reply
// (tests/server: the bounded load). Linux lets listen() on a listening socket change the
// backlog, so the server's socket (found by its port; the library does not expose it) is
// given the system's maximum, as uvicorn's 2048 does for vLLM.
void widen_listen_backlog(int port) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  const int max_fd = static_cast<int>(std::min<rlim_t>(limit.rlim_cur, 65536));
  for (int fd = 0; fd < max_fd; ++fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0) continue;
    const int fd_port = addr.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                        : addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                                     : -1;
    if (fd_port == port) listen(fd, SOMAXCONN);
  }
}

// What cpp-httplib 0.11 leaves unbounded, put back around Server::process_request(), which parses
// and answers one request from any Stream: its own per-connection loop reads through a fresh stream
// per request and so drops pipelined bytes; its reads have a timeout per call, not per request, so a
// client trickling one byte a second holds a thread for ever; and it reads a chunked body past
// set_payload_max_length(). ConnectionStream keeps one read buffer for the whole connection
// (pipelined requests are answered in order), gives each request a deadline for arriving whole
// (headers and body: it ends when a route handler starts), bounds the bytes a request may take,
// answers nothing once the server stops, and the server caps the connections it serves at once.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, const std::atomic<bool>& stopping) : fd_(fd), stopping_(stopping) {}

  /// Starts reading a request: it must arrive within @p deadline_s and take at most @p max_bytes.
  void begin_request(double deadline_s, std::size_t max_bytes) {
    deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(deadline_s));
    reading_ = true;
    budget_ = max_bytes;
    over_budget_ = false;
  }
  /// The headers have been read: the body may take @p max_bytes more (on the wire, chunk framing included).
  void begin_body(std::size_t max_bytes) { budget_ = max_bytes; }
  /// The request has been read whole (a route handler runs): the deadline and the byte budget stop counting.
  void end_reading() { reading_ = false; }
  /// The request's bytes went past the budget given to begin_request().
  bool over_budget() const { return over_budget_; }
  /// The request was cut for its deadline or for the shutdown.
  bool cut() const { return cut_; }

  /// Waits until a request's first byte is here (or buffered), at most @p idle_s; false when none came.
  bool wait_for_request(double idle_s) {
    if (pos_ < buf_.size()) return true;
    const auto until =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(idle_s));
    return fill(until) > 0;
  }

  bool is_readable() const override { return pos_ < buf_.size() || poll_once(POLLIN, 0); }
  bool is_writable() const override { return poll_once(POLLOUT, 5000); }

  ssize_t read(char* ptr, std::size_t size) override {
    if (pos_ == buf_.size()) {
      const auto until = reading_ ? deadline_ : std::chrono::steady_clock::now() + std::chrono::seconds(5);
      if (fill(until) <= 0) return -1;
    }
    std::size_t n = std::min(size, buf_.size() - pos_);
    if (reading_) {
      if (budget_ == 0) {
        over_budget_ = true;
        return -1;
      }
      n = std::min(n, budget_);
      budget_ -= n;
    }
    std::memcpy(ptr, buf_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  /// The SSE writer has ended this response's chunked body: the library's own last chunk is not sent again.
  void body_ended_by_writer() { drop_last_chunk_ = true; }

  ssize_t write(const char* ptr, std::size_t size) override {
    if (drop_last_chunk_) {
      drop_last_chunk_ = false;
      // cpp-httplib's DataSink::done() writes the last chunk in one call; anything else is passed on.
      if (std::string_view(ptr, size) == SseWriter::kLastChunk) return static_cast<ssize_t>(size);
    }
    std::size_t sent = 0;
    while (sent < size) {
      if (!poll_once(POLLOUT, 5000)) return -1;  // a client that reads nothing for 5 s is gone
      const ssize_t n = ::send(fd_, ptr + sent, size - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return -1;
      sent += static_cast<std::size_t>(n);
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(::getsockname, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  // Reads what the socket has into the buffer, waiting until @p until at most, in slices short
  // enough to notice the shutdown; returns the bytes read, 0 at end of stream or time, -1 on error.
  ssize_t fill(std::chrono::steady_clock::time_point until) {
    if (pos_ == buf_.size()) buf_.clear(), pos_ = 0;
    for (;;) {
      if (stopping_) {
        cut_ = true;
        return -1;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        cut_ = reading_;
        return 0;
      }
      if (!poll_once(POLLIN, static_cast<int>(std::min<long>(left.count(), 100)))) continue;
      char chunk[16384];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) buf_.append(chunk, static_cast<std::size_t>(n));
      return n;
    }
  }

  bool poll_once(short events, int timeout_ms) const {
    pollfd p{fd_, events, 0};
    return ::poll(&p, 1, timeout_ms) > 0;
  }

  template <typename Name>
  void address(Name name, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    char host[NI_MAXHOST] = "";
    port = 0;
    if (name(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        ::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
      return;
    ip = host;
    port = addr.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
           : addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                        : 0;
  }

  const int fd_;
  const std::atomic<bool>& stopping_;
  std::string buf_;  // bytes received and not yet read: the rest of a pipelined request stays here
  std::size_t pos_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  bool reading_ = false;
  std::size_t budget_ = 0;
  bool over_budget_ = false;
  bool cut_ = false;
  bool drop_last_chunk_ = false;
};

// The connection a handler thread is serving, for the route handlers and the error handler.
thread_local ConnectionStream* current_connection = nullptr;

class GuardedServer : public httplib::Server {
 public:
  /// Spare pool threads beyond the cap: they only answer 503 and close.
  static constexpr int kRejectThreads = 4;
  /// A keep-alive connection closes after this long without a request, seconds (cpp-httplib's setting was 2).
  static constexpr double kKeepAliveIdleSeconds = 2.0;
  /// ... or after this many requests: nginx's `keepalive_requests` default. cpp-httplib's 5 made a
  /// benchmark client reconnect every fifth request, a TCP handshake and a new handler on the step's cores.
  static constexpr int kKeepAliveRequests = 1000;
  /// Bytes the request line and headers may take.
  static constexpr std::size_t kHeaderBytes = 64 << 10;
  /// Bytes a body may take on the wire beyond --max-body-bytes: a chunked body's framing.
  static constexpr std::size_t kFramingBytes = 16 << 10;

  GuardedServer(const ServerConfig& config, std::string busy_body)
      : config_(config), busy_body_(std::move(busy_body)) {}

  /// Refuses new connections and ends the ones that are idle or still sending (before stop()).
  void begin_stopping() { stopping_ = true; }
  /// True once begin_stopping() was called.
  bool stopping() const { return stopping_; }

 protected:
  bool process_and_close_socket(socket_t sock) override {
    const int one = 1;
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // no 40 ms Nagle + delayed-ACK stall on keep-alive
    const bool full = active_.fetch_add(1) >= config_.handler_threads;
    if (full || stopping_) {
      active_.fetch_sub(1);
      reject(sock, full ? busy_body_ : closing_body_);
      return true;
    }
    ConnectionStream strm(sock, stopping_);
    current_connection = &strm;
    bool ok = true;
    for (int left = kKeepAliveRequests; left > 0 && !stopping_ && strm.wait_for_request(kKeepAliveIdleSeconds);
         --left) {
      strm.begin_request(config_.request_read_timeout_s, kHeaderBytes);
      bool closed = false;
      ok = process_request(strm, left == 1, closed, nullptr);
      // A request cut short or over its budget leaves unread bytes: the connection cannot go on.
      if (!ok || closed || strm.over_budget() || strm.cut()) break;
    }
    current_connection = nullptr;
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    active_.fetch_sub(1);
    return ok;
  }

 private:
  // 503 and close, without reading the request: a client learns the server is full at once.
  void reject(socket_t sock, const std::string& body) const {
    const std::string response =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    ::send(sock, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(sock, SHUT_WR);
    // Draining what the client sent keeps the kernel from answering it with a reset that could
    // discard the 503 before the client reads it; bounded to 200 ms.
    const auto give_up = std::chrono::steady_clock::now() + 200ms;
    char sink[4096];
    pollfd p{sock, POLLIN, 0};
    while (std::chrono::steady_clock::now() < give_up && ::poll(&p, 1, 50) >= 0) {
      if ((p.revents & POLLIN) && ::recv(sock, sink, sizeof sink, MSG_DONTWAIT) <= 0) break;
    }
    ::close(sock);
  }

  const ServerConfig& config_;
  const std::string busy_body_;
  const std::string closing_body_ = error_object(503, "the server is shutting down").dump();
  std::atomic<int> active_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace

namespace {

std::vector<std::int32_t> tokenize(const CompletionRequest& r, const ServedModel& model) {
  if (r.endpoint == Endpoint::chat_completions) {
    if (!model.chat_template)
      throw ApiError(400,
                     "model '" + model.name +
                         "' has no chat template (a --preset has no tokenizer); use "
                         "/v1/completions with token ids",
                     "messages");
    try {
      // As transformers' apply_chat_template: the template writes the special tokens itself.
      return model.tokenizer->encode(model.chat_template->render(r.messages, true), false);
    } catch (const Error& e) {
      throw ApiError(400, e.what(), "messages");
    }
  }
  if (!r.prompt_text) return r.prompt_ids;
  if (!model.tokenizer)
    throw ApiError(400, "model '" + model.name + "' has no tokenizer (a --preset); send 'prompt' as token ids",
                   "prompt");
  std::vector<std::int32_t> ids = model.tokenizer->encode(*r.prompt_text, true);
  if (ids.empty()) throw ApiError(400, "'prompt' is empty", "prompt");
  return ids;
}

}  // namespace

CheckedRequest check_request(const std::string& body, Endpoint endpoint, const ServedModel& model) {
  CheckedRequest checked{parse_completion_request(body, endpoint, model.vocab_size), {}};
  const CompletionRequest& r = checked.request;
  if (!r.model.empty() && r.model != model.name)
    throw ApiError(404, "The model `" + r.model + "` does not exist.", "model");
  if (!r.stop.empty() && !model.tokenizer)
    throw ApiError(400, "'stop' needs a tokenizer, and model '" + model.name + "' has none", "stop");
  EngineRequest& er = checked.engine;
  er.prompt = tokenize(r, model);
  const long prompt_len = static_cast<long>(er.prompt.size());
  const long max_tokens = r.max_tokens ? *r.max_tokens : model.max_model_len - prompt_len;
  // vLLM's wording, so clients that parse it keep working.
  if (prompt_len + max_tokens > model.max_model_len || max_tokens < 1)
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(model.max_model_len) +
                       " tokens. However, you requested " + std::to_string(prompt_len + std::max(1L, max_tokens)) +
                       " tokens (" + std::to_string(prompt_len) + " in the " +
                       (endpoint == Endpoint::chat_completions ? "messages" : "prompt") + ", " +
                       std::to_string(std::max(1L, max_tokens)) +
                       " in the completion). Please reduce the length of the prompt or completion.",
                   r.max_tokens ? "max_tokens" : "prompt");
  er.max_tokens = static_cast<int>(max_tokens);
  er.sampling = r.sampling;
  if (!r.ignore_eos) er.stop_token_ids = model.stop_token_ids;
  return checked;
}

struct OpenAIServer::Impl {
  EngineLoop& loop;
  ServedModel model;
  ServerConfig config;
  GuardedServer http;
  SseWriter writer;
  std::thread listener;
  std::atomic<std::uint64_t> next_id{0};

  Impl(EngineLoop& l, ServedModel m, ServerConfig c)
      : loop(l),
        model(std::move(m)),
        config(std::move(c)),
        http(config, error_object(503, "the server is serving its most connections (" +
                                           std::to_string(config.handler_threads) + ", --max-connections); retry later")
                         .dump()),
        writer(std::chrono::seconds(5), std::chrono::microseconds(config.stream_interval_us)) {
    loop.on_step([this](bool news) { writer.notify(news); });
  }
  ~Impl() { loop.on_step({}); }  // before the writer goes: the loop outlives the server
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  std::string body_too_large() const {
    return "request body is larger than " + std::to_string(config.max_body_bytes) + " bytes (--max-body-bytes)";
  }

  void completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    // A chunked body's framing has an allowance of its own on the wire (begin_body()): its bytes are held here.
    if (req.body.size() > config.max_body_bytes) throw ApiError(413, body_too_large());
    CheckedRequest checked = check_request(req.body, endpoint, model);
    const CompletionRequest& r = checked.request;
    const long prompt_len = static_cast<long>(checked.engine.prompt.size());
    EngineRequest er = std::move(checked.engine);
    const bool chat = endpoint == Endpoint::chat_completions;
    ResponseHeader header{
        endpoint, (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++),
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(),
        model.name};
    auto reply = std::make_shared<Reply>(loop, loop.submit(std::move(er)), model.tokenizer, r.stop, header,
                                         Usage{static_cast<int>(prompt_len), 0}, r.include_usage);
    // Wait for the engine to take or refuse the request, so a refusal is still a 4xx.
    RequestStream::Update& first = reply->first;
    while (!first.admitted && !first.finished) first = reply->stream->next(kPollInterval);
    if (!first.admitted) {
      const bool closing = first.error == "the server is shutting down";
      throw ApiError(closing ? 503 : 400, first.error, closing ? "" : "prompt");
    }
    if (r.stream)
      stream_reply(res, reply);
    else
      whole_reply(res, *reply);
  }

  void whole_reply(httplib::Response& res, Reply& reply) {
    std::vector<Reply::Piece> pieces;
    bool ended = reply.take(reply.first, pieces);
    while (!ended) ended = reply.take(reply.stream->next(kPollInterval), pieces);
    std::string text;
    std::vector<std::int32_t> ids;
    for (const auto& p : pieces) text += p.text, ids.insert(ids.end(), p.ids.begin(), p.ids.end());
    res.set_content(response_object(reply.header, text, ids, reply.finish_reason, reply.usage).dump(),
                    "application/json");
  }

  void stream_reply(httplib::Response& res, const std::shared_ptr<Reply>& reply) {
    res.set_header("Cache-Control", "no-cache");
    // The headers are on the socket when the provider first runs; the writer sends every chunk, the last one too.
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, reply](std::size_t, httplib::DataSink& sink) {
          // false: the client left (or the server stops); the connection is dropped and the releaser aborts.
          if (!current_connection || !writer.stream(current_connection->socket(), *reply)) return false;
          current_connection->body_ended_by_writer();
          sink.done();
          return true;
        },
        [reply](bool) {
          if (!reply->stream->finished()) reply->loop.abort(*reply->stream);
        });
  }

  void routes() {
    http.set_payload_max_length(config.max_body_bytes);
    const int threads = config.handler_threads + GuardedServer::kRejectThreads;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      // Called between the headers and the body: the budget that bounds a chunked body, on every path.
      if (current_connection) current_connection->begin_body(config.max_body_bytes + GuardedServer::kFramingBytes);
      if (config.api_key.empty() || !req.path.starts_with("/v1/")) return httplib::Server::HandlerResponse::Unhandled;
      if (req.get_header_value("Authorization") == "Bearer " + config.api_key)
        return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, 401, "Unauthorized: missing or wrong API key (Authorization: Bearer <key>)");
      return httplib::Server::HandlerResponse::Handled;
    });
    // Statuses cpp-httplib sets by itself (404 route, 413 body, 400 malformed HTTP) get an OpenAI error object too.
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      // A body read past --max-body-bytes (a chunked one; the library bounds only Content-Length) fails the read.
      if (current_connection && current_connection->over_budget()) res.status = 413;
      // cpp-httplib caps a form-urlencoded body (curl -d's default type) at 8192 bytes whatever the payload limit.
      const bool form = req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded");
      const std::string message =
          res.status == 413 && form
              ? "a Content-Type: application/x-www-form-urlencoded body is limited to 8192 bytes; send the JSON "
                "with Content-Type: application/json (curl -H 'Content-Type: application/json')"
          : res.status == 413 ? body_too_large()
          : res.status == 404 ? "no route " + req.method + " " + req.path
                              : std::string("HTTP error ") + std::to_string(res.status);
      send_error(res, res.status, message);
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      try {
        std::rethrow_exception(ep);
      } catch (const ApiError& e) {
        send_error(res, e.status, e.what(), e.param);
      } catch (const Error& e) {
        send_error(res, 400, e.what());
      } catch (const std::exception& e) {
        send_error(res, 500, std::string("internal error: ") + e.what());
      } catch (...) {
        send_error(res, 500, "internal error");
      }
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      if (current_connection) current_connection->end_reading();
      completion(req, res, Endpoint::completions);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      if (current_connection) current_connection->end_reading();
      completion(req, res, Endpoint::chat_completions);
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      const json card = {{"id", model.name},
                         {"object", "model"},
                         {"created", 0},
                         {"owned_by", "servelab"},
                         {"max_model_len", model.max_model_len},
                         {"vocab_size", model.vocab_size}};
      res.set_content(json{{"object", "list"}, {"data", json::array({card})}}.dump(), "application/json");
    });
    http.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(loop.metrics_text(), "text/plain; version=0.0.4");
    });
    if (config.dashboard) add_dashboard_routes(http, *config.dashboard, [this] { return http.stopping(); });
  }
};

OpenAIServer::OpenAIServer(EngineLoop& loop, ServedModel model, ServerConfig config)
    : impl_(std::make_unique<Impl>(loop, std::move(model), std::move(config))) {
  impl_->routes();
}

OpenAIServer::~OpenAIServer() { stop(); }

int OpenAIServer::start() {
  const ServerConfig& c = impl_->config;
  check(c.port >= 0 && c.port <= 65535, "--port must be in [0, 65535], got ", c.port);
  check(c.handler_threads >= 1, "handler threads must be >= 1, got ", c.handler_threads);
  const int port =
      c.port == 0 ? impl_->http.bind_to_any_port(c.host) : (impl_->http.bind_to_port(c.host, c.port) ? c.port : -1);
  check(port > 0, "--host ", c.host, " --port ", c.port,
        ": cannot listen there (address in use, or not this machine's)");
  widen_listen_backlog(port);
  impl_->listener = std::thread([this] {
    // A client that leaves makes the next write raise SIGPIPE; blocked here, the handler
    // threads cpp-httplib starts from this thread inherit the mask and see EPIPE instead.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    impl_->http.listen_after_bind();
  });
  // Return once a request is answered: cpp-httplib's accept queue holds only a few connections
  // (backlog 5) until its handler threads exist, and a burst in that window meets closed sockets.
  const std::string probe_host = c.host == "0.0.0.0" ? "127.0.0.1" : c.host == "::" ? "::1" : c.host;
  for (int attempt = 0; attempt < 100; ++attempt) {
    httplib::Client probe(probe_host, port);
    probe.set_connection_timeout(0, 100'000);
    if (const auto res = probe.Get("/health"); res && res->status == 200) return port;
    std::this_thread::sleep_for(50ms);
  }
  fail("--host ", c.host, " --port ", port, ": the server did not answer /health within 5 s");
}

void OpenAIServer::stop() {
  if (!impl_->listener.joinable()) return;
  impl_->http.begin_stopping();  // idle and half-sent connections are cut, so the pool's threads can end
  impl_->writer.stop();          // and streaming ones
  impl_->http.stop();
  impl_->listener.join();
}

}  // namespace servelab
