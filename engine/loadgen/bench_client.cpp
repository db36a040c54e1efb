// SPDX-License-Identifier: MIT
#include "loadgen/bench_client.h"

#include <httplib.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <ctime>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

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

void send_one(const WorkloadRequest& w, const BenchConfig& config, double clock_zero, int hang_up_after,
              BenchRequestResult& r) {
  r.prompt_len = static_cast<int>(w.prompt_ids.size());
  r.times.first_scheduled = now_seconds() - clock_zero;
  httplib::Client client(config.host, config.port);
  client.set_read_timeout(std::chrono::duration<double>(config.timeout_s));
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  if (!config.api_key.empty()) req.set_header("Authorization", "Bearer " + config.api_key);
  req.body = json{{"model", config.model},
                  {"prompt", w.prompt_ids},
                  {"max_tokens", w.max_tokens},
                  {"temperature", 0.0},
                  {"stream", true},
                  {"stream_options", {{"include_usage", true}}},
                  {"ignore_eos", config.ignore_eos}}
                 .dump();
  SseReader reader(r, clock_zero, hang_up_after);
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    return reader.feed(data, n);
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  try {
    client.send(req, res, error);
  } catch (const Error& e) {  // a chunk that is not JSON
    r.error = e.what();
    return;
  }
  if (hang_up_after > 0 && static_cast<int>(r.times.token_times.size()) >= hang_up_after) {
    r.disconnected = true;
    r.error = "hung up on purpose after " + std::to_string(hang_up_after) + " tokens";
  } else if (error != httplib::Error::Success) {
    r.error = "HTTP client: " + httplib::to_string(error);
  } else if (res.status != 200) {
    r.error = "HTTP " + std::to_string(res.status) + ": " + reader.rest();
  } else if (!reader.done()) {
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

// Why one more request thread should not start, or "" when it may: under ulimit -v, threads started until
// one fails would leave the running ones no address space to allocate in as they finish, and an allocation
// that fails inside a destructor that may not throw (nlohmann::json's) ends the process. So a thread starts
// only while its stack and 256 MiB for the running ones (room for a few more malloc arenas of 64 MiB) still
// fit under the limit.
std::string address_space_short() {
  rlimit limit{}, stack{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return "";
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  if (!(statm >> pages)) return "";
  const std::size_t used = pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  // glibc gives a thread the stack size of ulimit -s (8 MiB unless set; 2 MiB when unlimited).
  const bool stack_known = ::getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY;
  const std::size_t need = (stack_known ? stack.rlim_cur : 2u << 20) + (256u << 20);
  if (used + need <= limit.rlim_cur) return "";
  return "ulimit -v leaves " + std::to_string((limit.rlim_cur - std::min<std::size_t>(used, limit.rlim_cur)) >> 20) +
         " MiB of address space, a thread's stack and headroom need " + std::to_string(need >> 20) + " MiB";
}

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
  block_sigpipe();  // the request threads started below inherit it
  BenchResult result;
  result.requests.resize(workload.size());
  std::mutex mutex;
  std::condition_variable slot_freed;
  int in_flight = 0, done = 0;
  // jthreads: anything that leaves this function early (out of memory while starting them) joins the started
  // ones first, where std::thread's destructor would end the process.
  std::vector<std::jthread> threads;
  threads.reserve(workload.size());
  std::vector<char> out_of_memory(workload.size(), 0);  // [request] its thread ran out of memory
  // Under ulimit -v, glibc's per-thread malloc arenas (64 MiB of address space each, up to 8 a core)
  // would outgrow the headroom address_space_short() keeps; a few arenas suffice for a client.
  if (rlimit as{}; ::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ::mallopt(M_ARENA_MAX, 2);
  std::string out_of_threads;  // why a request thread could not start; the rest are not tried
  const double zero = now_seconds();
  SplitMix64 rng(request_seed(config.seed, 0, 4));
  for (std::size_t i = 0; i < workload.size(); ++i) {
    // Who hangs up, and after how many tokens (1 to 4), is drawn here, in order, so a seed repeats it.
    const bool hang_up = rng.uniform() < config.disconnect_fraction;
    const int hang_up_after = hang_up ? rng.uniform_int(1, 4) : 0;
    const double wait = workload[i].arrival_s - (now_seconds() - zero);
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    result.requests[i].times.arrival = workload[i].arrival_s;
    {
      std::unique_lock lock(mutex);
      slot_freed.wait(lock, [&] { return config.max_concurrency == 0 || in_flight < config.max_concurrency; });
      ++in_flight;
    }
    const auto finished = [&] {
      std::lock_guard lock(mutex);
      --in_flight;
      ++done;
      try {
        if (on_done) on_done(done, static_cast<int>(workload.size()));
      } catch (const std::exception&) {  // a progress line that could not be made (out of memory) is skipped
      }
      slot_freed.notify_one();
    };
    if (out_of_threads.empty())
      if (const std::string why = address_space_short(); !why.empty())
        out_of_threads = "cannot start a request thread (" + why + "); lower --max-concurrency or --num-prompts";
    if (!out_of_threads.empty()) {
      result.requests[i].error = out_of_threads;
      finished();
      continue;
    }
    try {
      threads.emplace_back([&, i, hang_up_after, finished] {
        try {
          send_one(workload[i], config, zero, hang_up_after, result.requests[i]);
        } catch (const std::bad_alloc&) {  // this request fails, the run goes on; its message is written after
          out_of_memory[i] = 1;            // the join, since making a string here could throw again
        }
        finished();
      });
    } catch (const std::exception& e) {
      // Out of threads (ulimit -u, memory: system_error, or bad_alloc for the thread's state): this request
      // and the rest fail with the reason; the started ones still finish.
      out_of_threads =
          std::string("cannot start a request thread (") + e.what() + "); lower --max-concurrency or --num-prompts";
      result.requests[i].error = out_of_threads;
      finished();
    }
  }
  threads.clear();  // joins them
  result.duration = now_seconds() - zero;
  for (std::size_t i = 0; i < workload.size(); ++i)
    if (out_of_memory[i])
      result.requests[i].error = "out of memory in the client; lower --max-concurrency or --num-prompts";
  return result;
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
  if (labels.in_process_tokens_per_second > 0) {
    j["in_process_output_throughput"] = labels.in_process_tokens_per_second;
    j["http_overhead_ratio"] = (d > 0 ? t.output_tokens / d : 0) / labels.in_process_tokens_per_second;
  }
  return j;
}

}  // namespace servelab
