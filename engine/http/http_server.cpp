// SPDX-License-Identifier: MIT
#include "http/http_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "http/openai_protocol.h"
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

// One reply's state from submission to its last byte; shared by the handler and cpp-httplib's content provider.
struct Reply {
  Reply(EngineLoop& l, std::shared_ptr<RequestStream> s, const Tokenizer* tokenizer,
        std::vector<std::string> stop_strings, ResponseHeader h, Usage u, bool with_usage)
      : loop(l),
        stream(std::move(s)),
        text(tokenizer, std::move(stop_strings)),
        header(std::move(h)),
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

  EngineLoop& loop;
  std::shared_ptr<RequestStream> stream;
  TextStream text;
  ResponseHeader header;
  Usage usage;
  bool include_usage;
  RequestStream::Update first;  // what arrived with the admission, not yet sent
  std::string finish_reason;
  bool first_taken = false;  // `first` has been turned into chunks
  bool first_chunk = true;   // the next chunk is the first (a chat chunk then carries the role)
};

std::string sse(const json& event) { return "data: " + event.dump() + "\n\n"; }

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

}  // namespace

struct OpenAIServer::Impl {
  EngineLoop& loop;
  ServedModel model;
  ServerConfig config;
  httplib::Server http;
  std::thread listener;
  std::atomic<std::uint64_t> next_id{0};

  Impl(EngineLoop& l, ServedModel m, ServerConfig c) : loop(l), model(std::move(m)), config(std::move(c)) {}

  std::vector<std::int32_t> tokenize(const CompletionRequest& r) const {
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

  void completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    const CompletionRequest r = parse_completion_request(req.body, endpoint, model.vocab_size);
    if (!r.model.empty() && r.model != model.name)
      throw ApiError(404, "The model `" + r.model + "` does not exist.", "model");
    if (!r.stop.empty() && !model.tokenizer)
      throw ApiError(400, "'stop' needs a tokenizer, and model '" + model.name + "' has none", "stop");
    EngineRequest er;
    er.prompt = tokenize(r);
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
    res.set_chunked_content_provider(
        "text/event-stream",
        [reply](std::size_t, httplib::DataSink& sink) {
          Reply& r = *reply;
          std::vector<Reply::Piece> pieces;
          RequestStream::Update u;
          if (r.first_taken)
            u = r.stream->next(kPollInterval);
          else
            u = std::move(r.first), r.first_taken = true;
          const bool ended = r.take(u, pieces);
          std::string out;
          for (std::size_t i = 0; i < pieces.size(); ++i) {
            const bool last = ended && i + 1 == pieces.size();
            out +=
                sse(chunk_object(r.header, pieces[i].text, pieces[i].ids, last ? r.finish_reason : "", r.first_chunk));
            r.first_chunk = false;
          }
          if (r.first_chunk && !ended) return true;  // keep the role for the chunk with the first token
          r.first_chunk = false;
          if (ended) {
            if (r.include_usage) out += sse(usage_chunk(r.header, r.usage));
            out += "data: [DONE]\n\n";
          }
          // A failed write means the client left: returning false drops the connection, and the releaser aborts.
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
          if (ended) sink.done();
          return true;
        },
        [reply](bool) {
          if (!reply->stream->finished()) reply->loop.abort(*reply->stream);
        });
  }

  void routes() {
    http.set_payload_max_length(config.max_body_bytes);
    http.set_keep_alive_timeout(2);
    const int threads = config.handler_threads;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (config.api_key.empty() || !req.path.starts_with("/v1/")) return httplib::Server::HandlerResponse::Unhandled;
      if (req.get_header_value("Authorization") == "Bearer " + config.api_key)
        return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, 401, "Unauthorized: missing or wrong API key (Authorization: Bearer <key>)");
      return httplib::Server::HandlerResponse::Handled;
    });
    // Statuses cpp-httplib sets by itself (404 route, 413 body, 400 malformed HTTP) get an OpenAI error object too.
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const std::string message =
          res.status == 413   ? "request body is larger than " + std::to_string(config.max_body_bytes) + " bytes"
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
      completion(req, res, Endpoint::completions);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
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
  impl_->http.stop();
  impl_->listener.join();
}

}  // namespace servelab
