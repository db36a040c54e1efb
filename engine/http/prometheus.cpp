// SPDX-License-Identifier: MIT
#include "http/prometheus.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "core/timer.h"

namespace servelab {

namespace {

// Prometheus floats: shortest round-trip form is not required, 17 significant digits always round-trip.
std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {
  for (std::size_t i = 1; i < bounds_.size(); ++i)
    check(bounds_[i] > bounds_[i - 1], "histogram: bucket bounds must increase");
}

void Histogram::observe(double value) {
  for (std::size_t i = 0; i < bounds_.size(); ++i)
    if (value <= bounds_[i]) {
      ++counts_[i];
      break;
    }
  ++count_;
  sum_ += value;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, help, "histogram");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

void render_counter(std::string& out, const std::string& name, const std::string& help, double value) {
  header(out, name, help, "counter");
  out += name + " " + number(value) + "\n";
}

void render_gauge(std::string& out, const std::string& name, const std::string& help, double value) {
  header(out, name, help, "gauge");
  out += name + " " + number(value) + "\n";
}

void render_process_metrics(std::string& out) {
  render_counter(out, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                 process_cpu_seconds());
  // The second field of /proc/self/statm is the resident set in pages.
  long pages_total = 0, pages_resident = 0;
  std::ifstream statm("/proc/self/statm");
  if (statm >> pages_total >> pages_resident)
    render_gauge(out, "process_resident_memory_bytes", "Resident memory size in bytes.",
                 static_cast<double>(pages_resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)));
}

std::vector<double> ServerMetrics::latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
          0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0};
}

std::string ServerMetrics::render() const {
  std::string out;
  ttft.render(out, "servelab:time_to_first_token_seconds", "Time to first token, arrival to first output token.");
  tpot.render(out, "servelab:time_per_output_token_seconds",
              "Mean time per output token after the first, per request.");
  itl.render(out, "servelab:inter_token_latency_seconds", "Time between consecutive output tokens.");
  e2e.render(out, "servelab:e2e_request_latency_seconds", "Arrival to last output token.");
  queue_time.render(out, "servelab:request_queue_time_seconds", "Arrival to first scheduled.");
  render_counter(out, "servelab:prompt_tokens_total", "Prompt tokens of finished requests.",
                 static_cast<double>(prompt_tokens));
  render_counter(out, "servelab:generation_tokens_total", "Output tokens generated.",
                 static_cast<double>(generation_tokens));
  // One metric with a label per finish reason, as vLLM's request_success_total{finished_reason=...}.
  header(out, "servelab:request_success_total", "Finished requests by finish reason.", "counter");
  const char* reasons[] = {"stop", "length", "abort"};
  for (std::size_t i = 0; i < finished.size(); ++i)
    out += std::string("servelab:request_success_total{finished_reason=\"") + reasons[i] + "\"} " +
           std::to_string(finished[i]) + "\n";
  render_gauge(out, "servelab:num_requests_running", "Requests in the running batch.", num_running);
  render_gauge(out, "servelab:num_requests_waiting", "Requests waiting to be scheduled (preempted included).",
               num_waiting);
  render_counter(out, "servelab:num_preemptions_total", "Preemptions since start.", num_preemptions);
  render_gauge(out, "servelab:kv_cache_blocks_used", "KV blocks held by requests.", kv_blocks_used);
  render_gauge(out, "servelab:kv_cache_blocks_free", "KV blocks in the free queue.", kv_blocks_free);
  render_counter(out, "servelab:prefix_cache_queries_total",
                 "Prefix cache queries, in tokens: the tokens of every request admitted with prefix caching on.",
                 static_cast<double>(prefix_cache_queries));
  render_counter(out, "servelab:prefix_cache_hits_total", "Prefix cache hits, in tokens: queried tokens found cached.",
                 static_cast<double>(prefix_cache_hits));
  const int total = kv_blocks_used + kv_blocks_free;
  render_gauge(out, "servelab:kv_cache_usage_perc", "Fraction of KV blocks in use, 0..1.",
               total > 0 ? static_cast<double>(kv_blocks_used) / total : 0.0);
  render_process_metrics(out);
  return out;
}

}  // namespace servelab
