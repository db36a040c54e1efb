// SPDX-License-Identifier: MIT
/**
 * @file prometheus.h
 * @brief The server's metrics in the Prometheus text exposition format
 *        (version 0.0.4), as `GET /metrics` returns them: cumulative
 *        histograms for latencies, counters for totals, gauges for the
 *        engine's state now.
 * @verbatim
 *  # HELP servelab:time_to_first_token_seconds Time to first token.
 *  # TYPE servelab:time_to_first_token_seconds histogram
 *  servelab:time_to_first_token_seconds_bucket{le="0.01"} 0
 *  ...
 *  servelab:time_to_first_token_seconds_bucket{le="+Inf"} 7
 *  servelab:time_to_first_token_seconds_sum 1.25
 *  servelab:time_to_first_token_seconds_count 7
 * @endverbatim
 * The names are vLLM's (`vllm:time_to_first_token_seconds`,
 * `vllm:num_requests_running`, ...) under the prefix `servelab:`, so a
 * dashboard written for one reads the other.
 */
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace servelab {

/// A cumulative Prometheus histogram: counts of observations <= each upper bound.
class Histogram {
 public:
  /// Buckets with upper bounds @p bounds (seconds, increasing); a +Inf bucket is implied.
  explicit Histogram(std::vector<double> bounds);
  /// Records one observation.
  void observe(double value);
  /// Observations so far.
  std::uint64_t count() const { return count_; }
  /// Appends the `_bucket`, `_sum` and `_count` lines of metric @p name with its HELP and TYPE lines.
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;         // [B] upper bounds, increasing
  std::vector<std::uint64_t> counts_;  // [B] observations in (bounds[i-1], bounds[i]] (not cumulative)
  std::uint64_t count_ = 0;            // all observations, the +Inf bucket
  double sum_ = 0;                     // sum of all observations
};

/// Appends a counter (a total that only grows) with its HELP and TYPE lines.
void render_counter(std::string& out, const std::string& name, const std::string& help, double value);
/// Appends a gauge (a value now) with its HELP and TYPE lines.
void render_gauge(std::string& out, const std::string& name, const std::string& help, double value);

/**
 * @brief Appends the process's own metrics under the names Prometheus client libraries give them (and vLLM's
 *        server therefore exports): `process_cpu_seconds_total` (user + system, every thread) and
 *        `process_resident_memory_bytes`.
 */
void render_process_metrics(std::string& out);

/// What the server counts, each as vLLM names it; owned by the engine loop and read under its lock.
struct ServerMetrics {
  /// Latency buckets, seconds: vLLM's TTFT buckets (1 ms to 160 s), fine enough for CPU steps.
  static std::vector<double> latency_buckets();

  Histogram ttft{latency_buckets()};        ///< servelab:time_to_first_token_seconds
  Histogram tpot{latency_buckets()};        ///< servelab:time_per_output_token_seconds (requests with 2+ tokens)
  Histogram itl{latency_buckets()};         ///< servelab:inter_token_latency_seconds (every gap)
  Histogram e2e{latency_buckets()};         ///< servelab:e2e_request_latency_seconds
  Histogram queue_time{latency_buckets()};  ///< servelab:request_queue_time_seconds
  std::uint64_t prompt_tokens = 0;          ///< servelab:prompt_tokens_total
  std::uint64_t generation_tokens = 0;      ///< servelab:generation_tokens_total
  std::array<std::uint64_t, 3> finished{};  ///< servelab:request_success_total by finished_reason: stop, length, abort
  int num_running = 0;                      ///< servelab:num_requests_running
  int num_waiting = 0;                      ///< servelab:num_requests_waiting
  int num_preemptions = 0;                  ///< servelab:num_preemptions_total
  int kv_blocks_used = 0;                   ///< servelab:kv_cache_blocks_used
  int kv_blocks_free = 0;                   ///< servelab:kv_cache_blocks_free
  /// servelab:prefix_cache_queries_total (vLLM's vllm:prefix_cache_queries): prompt tokens looked up in the prefix cache.
  long prefix_cache_queries = 0;
  /// servelab:prefix_cache_hits_total (vllm:prefix_cache_hits): of those, tokens found cached.
  long prefix_cache_hits = 0;

  /// The whole `GET /metrics` body, render_process_metrics() included.
  std::string render() const;
};

}  // namespace servelab
