// SPDX-License-Identifier: MIT
#include "loadgen/bench_client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>

#include "core/json.h"
#include "core/random.h"
#include "core/timer.h"
#include "serve/replay.h"

namespace servelab {

namespace {

using nlohmann::json;

// Reads one streamed reply: SSE events separated by a blank line, each `data: <json>` or `data: [DONE]`.
class SseReader {
 public:
  SseReader(BenchRequestResult& r, double clock_zero, int hang_up_after)
      : r_(r), clock_zero_(clock_zero), hang_up_after_(hang_up_after) {}

  /// Takes bytes as they arrive; false to hang up.
  bool feed(const char* data, std::size_t n) {
    buffer_.append(data, n);
    std::size_t end;
    while ((end = buffer_.find("\n\n")) != std::string::npos) {
      const std::string event = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      if (!event.starts_with("data: ")) continue;
      if (!on_data(event.substr(6))) return false;
    }
    return true;
  }
  bool done() const { return done_; }
  /// Bytes that were not an event (an error body).
  const std::string& rest() const { return buffer_; }

 private:
  bool on_data(const std::string& payload) {
    if (payload == "[DONE]") {
      done_ = true;
      return true;
    }
    const json chunk = parse_json(payload, "stream chunk");
    const double now = now_seconds() - clock_zero_;
    if (const auto u = chunk.find("usage"); u != chunk.end() && u->is_object())
      usage_tokens_ = json_int<int>(u->value("completion_tokens", json(0)), 0, 1 << 30, "usage.completion_tokens");
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) return true;
    const json& c = (*choices)[0];
    if (const auto t = c.find("text"); t != c.end() && t->is_string()) r_.text += t->get<std::string>();
    if (const auto d = c.find("delta"); d != c.end() && d->contains("content") && (*d)["content"].is_string())
      r_.text += (*d)["content"].get<std::string>();
    const auto ids = c.find("token_ids");
    const std::size_t k = ids != c.end() && ids->is_array() ? ids->size() : 0;
    for (std::size_t i = 0; i < k; ++i) r_.times.token_times.push_back(now);
    r_.output_tokens = std::max(usage_tokens_, static_cast<int>(r_.times.token_times.size()));
    return hang_up_after_ <= 0 || static_cast<int>(r_.times.token_times.size()) < hang_up_after_;
  }

  BenchRequestResult& r_;
  double clock_zero_;
  int hang_up_after_;  // tokens after which to hang up; 0 = never
  std::string buffer_;
  int usage_tokens_ = 0;
  bool done_ = false;
};

// One request in flight: its easy handle, its body and what it has read so far. Callbacks run inside
// curl_multi_perform(), on the client's one thread.
struct Transfer {
  Transfer(std::size_t i, BenchRequestResult& r, double clock_zero, int hang_up)
      : index(i), reader(r, clock_zero, hang_up), hang_up_after(hang_up) {}
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;
  ~Transfer() { curl_easy_cleanup(easy); }

  std::size_t index;  // into the workload
  SseReader reader;
  int hang_up_after;           // tokens after which to hang up; 0 = never
  CURL* easy = nullptr;        // owned; removed from the multi handle before it is cleaned up
  std::string body;            // the POST body, alive as long as curl may send it
  double last_heard = 0;       // client clock, seconds: when the server last sent a byte (or when sent)
  bool timed_out = false;      // dropped by the client after --timeout seconds of silence
  std::exception_ptr failure;  // thrown in a callback (a chunk that is not JSON, out of memory)
};

// curl's write callback: body bytes (SSE events, or an error body). Returning less than given hangs up.
// No exception may cross curl's C frames, so one is kept for finish() to report.
std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  t->last_heard = now_seconds();
  try {
    return t->reader.feed(data, size * n) ? size * n : 0;
  } catch (...) {
    t->failure = std::current_exception();
    return 0;
  }
}

void finish(Transfer& t, CURLcode code, BenchRequestResult& r, double timeout_s) {
  long status = 0;
  curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
  if (t.failure) {
    try {
      std::rethrow_exception(t.failure);
    } catch (const std::bad_alloc&) {
      r.error = "out of memory in the client; lower --max-concurrency or --num-prompts";
    } catch (const std::exception& e) {
      r.error = e.what();
    }
  } else if (t.hang_up_after > 0 && static_cast<int>(r.times.token_times.size()) >= t.hang_up_after) {
    r.disconnected = true;
    r.error = "hung up on purpose after " + std::to_string(t.hang_up_after) + " tokens";
  } else if (t.timed_out) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
    r.error = std::string("HTTP client: nothing from the server for ") + seconds + " s (--timeout)";
  } else if (code != CURLE_OK) {
    r.error = std::string("HTTP client: ") + curl_easy_strerror(code);
  } else if (status != 200) {
    r.error = "HTTP " + std::to_string(status) + ": " + t.reader.rest();
  } else if (!t.reader.done()) {
    r.error = "stream ended without [DONE]";
  } else {
    r.success = true;
  }
}

// Blocks SIGPIPE in this thread: a write to a server that closed the connection fails with EPIPE instead.
void block_sigpipe() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
}

// Connections this process can still open under ulimit -n: the soft limit less the descriptors open now
// and a few that curl keeps for itself (its wake-up pipe, the resolver's socket).
std::size_t sockets_left() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return std::numeric_limits<std::size_t>::max();
  std::size_t open = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != decltype(it)();
       it.increment(ec))
    ++open;
  const std::size_t reserved = open + 8;
  return limit.rlim_cur > reserved ? limit.rlim_cur - reserved : 0;
}

// The server's URL for @p path; an IPv6 address goes in brackets.
std::string server_url(const BenchConfig& config, const char* path) {
  const bool ipv6 = config.host.find(':') != std::string::npos;
  return "http://" + (ipv6 ? "[" + config.host + "]" : config.host) + ":" + std::to_string(config.port) + path;
}

struct MultiDeleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
struct HeadersDeleter {
  void operator()(curl_slist* h) const { curl_slist_free_all(h); }
};

std::string ms_line(const char* label, double seconds) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%-40s %-10.2f\n", label, seconds * 1e3);
  return buf;
}

std::string section(const std::string& title, char fill) {
  const std::size_t n = 50, pad = (n - title.size()) / 2;
  return std::string(pad, fill) + title + std::string(n - pad - title.size(), fill) + "\n";
}

}  // namespace

BenchResult run_bench(const std::vector<WorkloadRequest>& workload, const BenchConfig& config,
                      const std::function<void(int, int)>& on_done) {
  check(config.max_concurrency >= 0, "--max-concurrency must be >= 0 (0 = no cap), got ", config.max_concurrency);
  check(config.disconnect_fraction >= 0 && config.disconnect_fraction <= 1,
        "--disconnect-fraction must be in [0, 1], got ", config.disconnect_fraction);
  check(std::isfinite(config.timeout_s) && config.timeout_s >= 0.001 && config.timeout_s <= 1e6,
        "--timeout must be a number of seconds in [0.001, 1e6], got ", config.timeout_s);
  static std::once_flag curl_ready;
  std::call_once(curl_ready, [] { check(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK, "libcurl: init failed"); });
  block_sigpipe();
  BenchResult result;
  const std::size_t n = workload.size();
  result.requests.resize(n);
  if (n == 0) return result;

  // At most this many connections at once: --max-concurrency, and what ulimit -n leaves. Requests past the cap
  // wait for a connection as they would for a --max-concurrency slot (and the wait is part of their TTFT).
  const std::size_t wanted = config.max_concurrency > 0 ? static_cast<std::size_t>(config.max_concurrency) : n;
  const std::size_t sockets = sockets_left();
  check(sockets >= 1, "ulimit -n leaves no file descriptor for a connection; raise it (ulimit -n 1024)");
  if (sockets < std::min(wanted, n)) result.connection_limit = static_cast<int>(sockets);
  const std::size_t cap = std::min({wanted, n, sockets});

  std::unique_ptr<CURLM, MultiDeleter> multi(curl_multi_init());
  check(multi != nullptr, "libcurl: cannot make a multi handle");
  // Finished requests leave their connections open in curl's cache, and the next request takes one (keep-alive).
  curl_multi_setopt(multi.get(), CURLMOPT_MAXCONNECTS, static_cast<long>(cap));
  curl_multi_setopt(multi.get(), CURLMOPT_MAX_TOTAL_CONNECTIONS, static_cast<long>(cap));
  std::unique_ptr<curl_slist, HeadersDeleter> headers;
  const auto add_header = [&](const std::string& line) {
    curl_slist* list = curl_slist_append(headers.get(), line.c_str());  // the same head once there is one
    check(list != nullptr, "libcurl: out of memory for the request headers");
    if (!headers) headers.reset(list);
  };
  add_header("Content-Type: application/json");
  add_header("Expect:");  // the body goes with the headers: no 100-continue round trip
  if (!config.api_key.empty()) add_header("Authorization: Bearer " + config.api_key);
  const std::string url = server_url(config, "/v1/completions");

  // Who hangs up, and after how many tokens (1 to 4), is drawn in request order, so a seed repeats it.
  std::vector<int> hang_up_after(n, 0);
  SplitMix64 rng(request_seed(config.seed, 0, 4));
  for (int& h : hang_up_after)
    if (rng.uniform() < config.disconnect_fraction) h = rng.uniform_int(1, 4);

  std::vector<std::unique_ptr<Transfer>> live(n);  // [request] while in flight
  std::size_t next = 0, active = 0;
  int done = 0;
  const double zero = now_seconds();
  const auto start = [&](std::size_t i) {
    BenchRequestResult& r = result.requests[i];
    r.prompt_len = static_cast<int>(workload[i].prompt_ids.size());
    r.times.arrival = workload[i].arrival_s;
    r.times.first_scheduled = now_seconds() - zero;
    auto t = std::make_unique<Transfer>(i, r, zero, hang_up_after[i]);
    t->body = json{{"model", config.model},
                   {"prompt", workload[i].prompt_ids},
                   {"max_tokens", workload[i].max_tokens},
                   {"temperature", 0.0},
                   {"stream", true},
                   {"stream_options", {{"include_usage", true}}},
                   {"ignore_eos", config.ignore_eos}}
                  .dump();
    t->easy = curl_easy_init();
    check(t->easy != nullptr, "libcurl: cannot make an easy handle");
    CURL* e = t->easy;
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_PROXY, "");  // the server is local: no http_proxy from the environment
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    t->last_heard = now_seconds();
    check(curl_multi_add_handle(multi.get(), e) == CURLM_OK, "libcurl: cannot add a request");
    live[i] = std::move(t);
    ++active;
  };
  const auto end = [&](Transfer& t, CURLcode code) {
    curl_multi_remove_handle(multi.get(), t.easy);
    finish(t, code, result.requests[t.index], config.timeout_s);
    live[t.index].reset();
    --active;
    ++done;
    try {
      if (on_done) on_done(done, static_cast<int>(n));
    } catch (const std::exception&) {  // a progress line that could not be made (out of memory) is skipped
    }
  };

  while (done < static_cast<int>(n)) {
    const double now = now_seconds() - zero;
    while (next < n && active < cap && workload[next].arrival_s <= now) start(next++);
    int running = 0;
    check(curl_multi_perform(multi.get(), &running) == CURLM_OK, "libcurl: curl_multi_perform failed");
    int queued = 0;
    while (CURLMsg* m = curl_multi_info_read(multi.get(), &queued)) {
      if (m->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &t);
      end(*t, m->data.result);
    }
    // Requests silent for --timeout seconds are dropped; the soonest such deadline bounds the wait below.
    double wake = now_seconds() + 1.0;
    for (std::unique_ptr<Transfer>& t : live) {
      if (!t) continue;
      if (now_seconds() - t->last_heard >= config.timeout_s) {
        t->timed_out = true;
        end(*t, CURLE_OPERATION_TIMEDOUT);
      } else {
        wake = std::min(wake, t->last_heard + config.timeout_s);
      }
    }
    if (next < n && active < cap) wake = std::min(wake, zero + workload[next].arrival_s);
    const int wait_ms = static_cast<int>(std::clamp((wake - now_seconds()) * 1e3, 0.0, 1000.0));
    if (done < static_cast<int>(n)) curl_multi_poll(multi.get(), nullptr, 0, wait_ms, nullptr);
  }
  result.duration = now_seconds() - zero;
  return result;
}

double server_cpu_seconds(const BenchConfig& config) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), curl_easy_cleanup);
  if (!easy) return -1;
  std::string body;
  const std::string url = server_url(config, "/metrics");
  // The body is read whole up to 4 MiB (a servelab /metrics is a few KiB); past that the transfer is cut.
  const auto on_metrics = +[](char* data, std::size_t size, std::size_t n, void* user) -> std::size_t {
    auto* out = static_cast<std::string*>(user);
    if (out->size() + size * n > (4u << 20)) return 0;
    out->append(data, size * n);
    return size * n;
  };
  CURL* e = easy.get();
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_metrics);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
  long status = 0;
  if (curl_easy_perform(e) != CURLE_OK || curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK ||
      status != 200)
    return -1;
  constexpr std::string_view name = "process_cpu_seconds_total ";
  for (std::size_t at = 0; at < body.size();) {
    const std::size_t end = std::min(body.find('\n', at), body.size());
    const std::string_view line(body.data() + at, end - at);
    at = end + 1;
    if (!line.starts_with(name)) continue;
    double value = -1;
    const auto [ptr, ec] = std::from_chars(line.data() + name.size(), line.data() + line.size(), value);
    return ec == std::errc() && ptr == line.data() + line.size() && std::isfinite(value) && value >= 0 ? value : -1;
  }
  return -1;
}

const BenchRequestResult* first_failure(const BenchResult& result) {
  for (const BenchRequestResult& r : result.requests)
    if (!r.success && !r.disconnected) return &r;
  return nullptr;
}

double run_in_process(Engine& engine, const std::vector<WorkloadRequest>& workload, int max_concurrency) {
  check(!workload.empty(), "in-process run: the workload is empty");
  // Each finished request is forgotten at once, as the server does, so a long run holds only the live ones.
  const ReplayResult run = replay(engine, workload,
                                  {.max_concurrency = max_concurrency,
                                   .on_step = [](Engine& e, const StepStats&, std::span<const RequestOutput> outputs) {
                                     for (const RequestOutput& out : outputs)
                                       if (out.finish_reason != FinishReason::NONE) e.release_request(out.request_id);
                                   }});
  return run.output_tokens_per_second();
}

SLO parse_goodput(const std::vector<std::string>& items) {
  SLO slo;
  for (const std::string& item : items) {
    const std::size_t colon = item.find(':');
    const std::string key = item.substr(0, colon);
    check(colon != std::string::npos && (key == "ttft" || key == "tpot"), "--goodput: '", item,
          "' is not ttft:MS or tpot:MS");
    double ms = 0;
    try {
      std::size_t used = 0;
      ms = std::stod(item.substr(colon + 1), &used);
      check(used == item.size() - colon - 1, "");
    } catch (const std::exception&) {
      fail("--goodput: '", item, "': the value is not a number of milliseconds");
    }
    check(ms > 0 && ms < 1e9, "--goodput: '", item, "': milliseconds must be positive");
    (key == "ttft" ? slo.ttft : slo.tpot) = ms / 1e3;
  }
  return slo;
}

namespace {

struct Totals {
  int completed = 0, failed = 0, disconnected = 0;
  long input_tokens = 0, output_tokens = 0;
  ServingMetrics m;  // over successful requests
};

Totals totals(const BenchResult& result, const SLO& slo) {
  Totals t;
  std::vector<const RequestTimes*> times;
  for (const auto& r : result.requests) {
    if (r.disconnected) ++t.disconnected;
    if (!r.success) {
      ++t.failed;
      continue;
    }
    ++t.completed;
    t.input_tokens += r.prompt_len;
    t.output_tokens += r.output_tokens;
    times.push_back(&r.times);
  }
  if (!times.empty() && std::any_of(times.begin(), times.end(), [](auto* x) { return !x->token_times.empty(); }))
    t.m = summarize_times(times, slo);
  return t;
}

}  // namespace

std::string format_bench_result(const BenchResult& result, const BenchConfig& config, const BenchLabels& labels) {
  const Totals t = totals(result, labels.goodput);
  const double d = result.duration;
  std::string out = section(" Serving Benchmark Result ", '=');
  char buf[128];
  const auto line = [&](const char* label, double value, int precision) {
    std::snprintf(buf, sizeof buf, "%-40s %-10.*f\n", label, precision, value);
    out += buf;
  };
  line("Successful requests:", t.completed, 0);
  line("Failed requests:", t.failed, 0);
  if (t.disconnected > 0) line("Disconnected on purpose:", t.disconnected, 0);
  if (config.max_concurrency > 0) line("Maximum request concurrency:", config.max_concurrency, 0);
  line("Benchmark duration (s):", d, 2);
  line("Total input tokens:", static_cast<double>(t.input_tokens), 0);
  line("Total generated tokens:", static_cast<double>(t.output_tokens), 0);
  line("Request throughput (req/s):", d > 0 ? t.completed / d : 0, 2);
  if (labels.goodput.ttft > 0 || labels.goodput.tpot > 0)
    line("Request goodput (req/s):", d > 0 ? t.m.num_meeting_slo / d : 0, 2);
  const double output_tps = d > 0 ? t.output_tokens / d : 0;
  line("Output token throughput (tok/s):", output_tps, 2);
  line("Total Token throughput (tok/s):", d > 0 ? (t.input_tokens + t.output_tokens) / d : 0, 2);
  out += section("Time to First Token", '-');
  out += ms_line("Mean TTFT (ms):", t.m.ttft.mean) + ms_line("Median TTFT (ms):", t.m.ttft.median) +
         ms_line("P99 TTFT (ms):", t.m.ttft.p99);
  out += section("Time per Output Token (excl. 1st token)", '-');
  out += ms_line("Mean TPOT (ms):", t.m.tpot.mean) + ms_line("Median TPOT (ms):", t.m.tpot.median) +
         ms_line("P99 TPOT (ms):", t.m.tpot.p99);
  out += section("Inter-token Latency", '-');
  out += ms_line("Mean ITL (ms):", t.m.itl.mean) + ms_line("Median ITL (ms):", t.m.itl.median) +
         ms_line("P99 ITL (ms):", t.m.itl.p99);
  if (labels.in_process_tokens_per_second > 0) {
    out += section("HTTP overhead (servelab)", '-');
    line("In-process output throughput (tok/s):", labels.in_process_tokens_per_second, 2);
    line("Through HTTP / in-process:", output_tps / labels.in_process_tokens_per_second, 3);
  }
  // Where the machine's CPU went, per output token: on shared cores the HTTP run's throughput is about what
  // the cores give divided by the server's and the client's costs together.
  const auto cpu_line = [&](const char* label, double seconds) {
    if (seconds >= 0 && t.output_tokens > 0) line(label, seconds * 1e6 / static_cast<double>(t.output_tokens), 1);
  };
  if (labels.server_cpu_seconds >= 0 || labels.client_cpu_seconds >= 0 || labels.in_process_cpu_seconds >= 0) {
    out += section("CPU per output token (servelab)", '-');
    cpu_line("Server CPU per output token (us):", labels.server_cpu_seconds);
    cpu_line("Client CPU per output token (us):", labels.client_cpu_seconds);
    cpu_line("In-process CPU per output token (us):", labels.in_process_cpu_seconds);
  }
  out += std::string(50, '=') + "\n";
  return out;
}

json bench_result_json(const BenchResult& result, const BenchConfig& config, const BenchLabels& labels) {
  const Totals t = totals(result, labels.goodput);
  const double d = result.duration;
  json j;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y%m%d-%H%M%S", std::localtime(&now));
  j["date"] = date;
  j["backend"] = "servelab";
  j["model_id"] = config.model;
  j["tokenizer_id"] = config.model;
  j["num_prompts"] = result.requests.size();
  j["request_rate"] = labels.request_rate;
  j["burstiness"] = 1.0;
  j["max_concurrency"] = config.max_concurrency > 0 ? json(config.max_concurrency) : json(nullptr);
  j["duration"] = d;
  j["completed"] = t.completed;
  j["failed"] = t.failed;
  j["total_input_tokens"] = t.input_tokens;
  j["total_output_tokens"] = t.output_tokens;
  j["request_throughput"] = d > 0 ? t.completed / d : 0;
  j["request_goodput"] =
      labels.goodput.ttft > 0 || labels.goodput.tpot > 0 ? json(d > 0 ? t.m.num_meeting_slo / d : 0) : json(nullptr);
  j["output_throughput"] = d > 0 ? t.output_tokens / d : 0;
  j["total_token_throughput"] = d > 0 ? (t.input_tokens + t.output_tokens) / d : 0;
  json input_lens = json::array(), output_lens = json::array(), ttfts = json::array(), itls = json::array(),
       texts = json::array(), errors = json::array();
  for (const auto& r : result.requests) {
    input_lens.push_back(r.prompt_len);
    output_lens.push_back(r.output_tokens);
    ttfts.push_back(r.success && !r.times.token_times.empty() ? r.times.token_times[0] - r.times.arrival : 0.0);
    json gaps = json::array();
    for (std::size_t k = 1; k < r.times.token_times.size(); ++k)
      gaps.push_back(r.times.token_times[k] - r.times.token_times[k - 1]);
    itls.push_back(gaps);
    texts.push_back(r.text);
    errors.push_back(r.error);
  }
  j["input_lens"] = input_lens;
  j["output_lens"] = output_lens;
  j["ttfts"] = ttfts;
  j["itls"] = itls;
  j["generated_texts"] = texts;
  j["errors"] = errors;
  const auto put = [&](const char* name, const Summary& s) {
    j[std::string("mean_") + name + "_ms"] = s.mean * 1e3;
    j[std::string("median_") + name + "_ms"] = s.median * 1e3;
    j[std::string("p99_") + name + "_ms"] = s.p99 * 1e3;
  };
  put("ttft", t.m.ttft);
  put("tpot", t.m.tpot);
  put("itl", t.m.itl);
  put("e2el", t.m.e2e);
  const auto cpu_field = [&](const char* key, double seconds) {
    if (seconds >= 0 && t.output_tokens > 0) j[key] = seconds * 1e6 / static_cast<double>(t.output_tokens);
  };
  cpu_field("server_cpu_us_per_output_token", labels.server_cpu_seconds);
  cpu_field("client_cpu_us_per_output_token", labels.client_cpu_seconds);
  cpu_field("in_process_cpu_us_per_output_token", labels.in_process_cpu_seconds);
  if (labels.in_process_tokens_per_second > 0) {
    j["in_process_output_throughput"] = labels.in_process_tokens_per_second;
    j["http_overhead_ratio"] = (d > 0 ? t.output_tokens / d : 0) / labels.in_process_tokens_per_second;
  }
  return j;
}

}  // namespace servelab
