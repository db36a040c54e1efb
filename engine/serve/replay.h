// SPDX-License-Identifier: MIT
/**
 * @file replay.h
 * @brief Replays a workload on an Engine: each request joins when its
 *        arrival time has come, the engine steps, and when nothing can run
 *        the driver idles until the next arrival. One loop for labs 04, 06,
 *        07, the in-process benchmark and the simulated fleet, so they idle
 *        and fail the same way.
 *
 * @verbatim
 *  workload (sorted by arrival_s)     engine clock (start = now() at the call)
 *  [ {0.00, ...}, {0.41, ...}, ...]
 *      |  add every request with start + arrival_s <= now()
 *      |  (and, with max_concurrency, only while fewer are in flight)
 *      v
 *  nothing to run?  ── yes ──►  idle until start + next arrival_s
 *      | no                       real clock:      sleep
 *      v                          simulated clock: advance_clock_to()
 *  step() ──► on_step(engine, stats, outputs)
 *      |
 *  scheduled nothing while requests are left?  stepping again would do the same:
 *      idle until the next arrival, or, with none left to add, Error (instead of spinning)
 * @endverbatim
 *
 * On a simulated engine it takes exactly the steps of the hand-written loops
 * it replaced (tests/engine/serve/replay_test.cpp checks the times to the
 * last bit), so the labs' simulated tables did not move when they switched.
 *
 * Not for lab 07's workers: there a step that schedules nothing is normal
 * while a request waits for its KV from another process (WAITING_FOR_REMOTE_KV),
 * so they step from their own message loop (disagg/worker.h), which the
 * transfers and the router's deadlines drive.
 *
 * @see labs/04_paged_attention/README.md
 */
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "serve/engine.h"
#include "workload/workload.h"

namespace servelab {

/// How replay() feeds and reports a run. Every field may be left at its default.
struct ReplayOptions {
  /// Most requests of the workload in flight at once (added, not yet finished); 0 = no cap.
  /// A request whose arrival has come waits outside the engine for a slot, as a benchmark
  /// client with `--max-concurrency` does (its TTFT then counts that wait: arrival stays its workload time).
  int max_concurrency = 0;
  /**
   * @brief Queues @p request (workload[@p index]) on @p engine and returns its id; empty =
   *        `engine.add_request(prompt_ids, greedy, max_tokens, {}, arrival)`.
   *        A disaggregated decode instance adds prefilled requests here instead.
   * @param arrival its arrival on the engine clock (start + arrival_s), seconds.
   */
  std::function<int(Engine& engine, const WorkloadRequest& request, std::size_t index, double arrival)> add{};
  /**
   * @brief Called after every step, empty ones included, with the step's stats and
   *        the tokens it emitted (one per request that got one). It may add or release
   *        requests (a workload keyed to step numbers, a server forgetting finished ones);
   *        the replay runs until the engine has nothing unfinished. A request it
   *        releases is gone from the engine: its id in ReplayResult::request_ids stays.
   */
  std::function<void(Engine& engine, const StepStats& step, std::span<const RequestOutput> outputs)> on_step{};
};

/// What a replay did, on the engine clock.
struct ReplayResult {
  std::vector<int> request_ids;  ///< [workload.size()] engine id of each workload request, in workload order
  long num_steps = 0;            ///< steps run, empty ones included
  long num_tokens = 0;           ///< tokens emitted by those steps (requests added before the call included)
  double start = 0;              ///< engine clock at the call, seconds: workload time 0
  double last_token_time = 0;    ///< engine clock after the step that emitted the last token; == start when none

  /// Tokens per second from start to the last token (vLLM's output throughput); 0 when none came.
  double output_tokens_per_second() const {
    return last_token_time > start ? static_cast<double>(num_tokens) / (last_token_time - start) : 0.0;
  }
};

/**
 * @brief Serves @p workload on @p engine until every request of it has been added
 *        and the engine has nothing unfinished; returns when all are done.
 *
 * Arrival times are offsets from the engine clock at the call, so a warmed-up
 * engine replays the same workload as a fresh one. Requests already queued
 * before the call are served too (and may be the whole work, with an empty
 * workload). The engine and @p workload are borrowed for the call only.
 * @param workload sorted by arrival_s (make_workload() sorts); may be empty.
 * @throws Error when max_concurrency < 0 or @p workload is out of arrival order
 *         (before anything runs); when a step schedules nothing while requests are
 *         unfinished and no arrival is left that could be added (a later arrival is
 *         waited for first; without the check the loop would spin forever); and
 *         whatever Engine::add_request (or options.add), step() or the callbacks throw.
 */
ReplayResult replay(Engine& engine, const std::vector<WorkloadRequest>& workload, const ReplayOptions& options = {});

}  // namespace servelab
