// SPDX-License-Identifier: MIT
/**
 * @file bench_client.h
 * @brief `servelab bench serve`: an open-loop load generator that measures
 *        what `vllm bench serve` measures, through the HTTP API, so the two
 *        tools' numbers compare directly.
 * @verbatim
 *  workload/workload.h           arrival_s 0.00   0.31   0.35   0.90 ...   Poisson at --request-rate, or all at t=0
 *  dispatcher                    wait for arrival, then for a slot under --max-concurrency (and ulimit -n)
 *  one thread, libcurl's multi   POST /v1/completions, stream: true; read SSE chunks; keep-alive connections
 *                                 |arrival |--cap wait--|sent|--...--|tok0|--ITL--|tok1| ... |[DONE]
 *                                 |<------------------- TTFT ------------>|
 * @endverbatim
 * One thread waits on every socket at once (curl_multi_poll) and wakes once
 * for all the streams a server step feeds, as vLLM's asyncio client does; a
 * thread per stream would wake once per stream per step, on the cores the
 * server is measured on.
 * Latencies start at the request's scheduled arrival, not at the moment it was
 * sent: waiting for a --max-concurrency slot is part of what a user waits, so
 * it is part of TTFT and E2E here (vLLM starts its clock after the slot).
 */
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/engine.h"
#include "serve/metrics.h"
#include "workload/workload.h"

namespace servelab {

/// Where and how the client sends its requests.
struct BenchConfig {
  std::string host = "127.0.0.1";  ///< --host
  int port = 8000;                 ///< --port
  std::string model;               ///< `model` of every request
  std::string api_key;             ///< sent as `Authorization: Bearer` when set
  int max_concurrency = 0;         ///< --max-concurrency: most requests in flight; 0 = no cap
  bool ignore_eos = false;         ///< --ignore-eos: ask for exactly max_tokens tokens
  double disconnect_fraction = 0;  ///< this share of requests hang up after their first token (load tests)
  std::uint64_t seed = 0;          ///< picks the requests that hang up
  double timeout_s = 600;          ///< a request with nothing from the server for this long fails, seconds
};

/// One request as the client saw it.
struct BenchRequestResult {
  bool success = false;       ///< HTTP 200 and a stream that ended with [DONE]
  bool disconnected = false;  ///< the client hung up on purpose (disconnect_fraction)
  std::string error;          ///< why it failed ("" on success)
  int prompt_len = 0;         ///< prompt tokens sent
  int output_tokens = 0;      ///< tokens received (usage.completion_tokens when the server sent it)
  RequestTimes times;         ///< client clock, seconds: arrival = scheduled, first_scheduled = sent, token_times
  std::string text;           ///< the generated text
};

/// A whole run.
struct BenchResult {
  std::vector<BenchRequestResult> requests;  ///< in workload order
  double duration = 0;                       ///< first arrival to last response, seconds
  int connection_limit = 0;  ///< connections ulimit -n allowed, when fewer than the run asked for; 0 = not limited
};

/**
 * @brief Replays @p workload against the server, streaming every reply.
 * @param on_done called after each request finishes (progress); may be empty.
 * @throws Error naming --max-concurrency, --timeout or the disconnect share when out of range, or ulimit -n
 *         when it leaves no descriptor for a connection.
 */
BenchResult run_bench(const std::vector<WorkloadRequest>& workload, const BenchConfig& config,
                      const std::function<void(int done, int total)>& on_done = {});

/// The first request that failed other than by hanging up on purpose (its `error` says why), or null.
const BenchRequestResult* first_failure(const BenchResult& result);

/**
 * @brief The same workload through @p engine in this process, no HTTP: the
 *        baseline of the server's overhead. Arrivals and the concurrency cap
 *        are honoured as run_bench() does; no stop tokens.
 * @return output tokens per second, first arrival to last token.
 */
double run_in_process(Engine& engine, const std::vector<WorkloadRequest>& workload, int max_concurrency);

/// What the run is labelled with in the block and the JSON.
struct BenchLabels {
  std::string request_rate = "inf";         ///< as given
  SLO goodput;                              ///< --goodput SLOs (0 = none)
  double in_process_tokens_per_second = 0;  ///< --compare-in-process result; 0 = not run
  /// CPU seconds (user + system, every thread) the server used for the HTTP run: its
  /// `process_cpu_seconds_total` after less before; < 0 = not measured.
  double server_cpu_seconds = -1;
  double client_cpu_seconds = -1;      ///< CPU seconds this process used during the HTTP run; < 0 = not measured
  double in_process_cpu_seconds = -1;  ///< CPU seconds this process used for --compare-in-process; < 0 = not run
};

/**
 * @brief The server's `process_cpu_seconds_total` from its `GET /metrics`.
 * @return the value; a negative number when the server does not answer or does not export it.
 */
double server_cpu_seconds(const BenchConfig& config);

/// The block `vllm bench serve` prints, line for line, plus servelab's extra lines.
std::string format_bench_result(const BenchResult& result, const BenchConfig& config, const BenchLabels& labels);

/// The result JSON with vLLM's field names (duration, completed, ttfts, itls, mean_ttft_ms, ...).
nlohmann::json bench_result_json(const BenchResult& result, const BenchConfig& config, const BenchLabels& labels);

/**
 * @brief Reads `--goodput` values, vLLM's spelling: `ttft:MS` and `tpot:MS`.
 * @throws Error naming --goodput for another key or a value that is not a positive number.
 */
SLO parse_goodput(const std::vector<std::string>& items);

}  // namespace servelab
