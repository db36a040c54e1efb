// SPDX-License-Identifier: MIT
#include "serve/replay.h"

#include <chrono>
#include <thread>
#include <unordered_set>

#include "core/error.h"

namespace servelab {

namespace {

// Nothing can run before @p until (engine clock): a real engine sleeps, a simulated one skips ahead.
void idle_until(Engine& engine, double until) {
  if (engine.simulated())
    engine.advance_clock_to(until);
  else
    std::this_thread::sleep_for(std::chrono::duration<double>(until - engine.now()));
}

}  // namespace

ReplayResult replay(Engine& engine, const std::vector<WorkloadRequest>& workload, const ReplayOptions& options) {
  check(options.max_concurrency >= 0, "--max-concurrency must be >= 0 (0 = no cap), got ", options.max_concurrency);
  for (std::size_t i = 1; i < workload.size(); ++i)
    check(workload[i].arrival_s >= workload[i - 1].arrival_s, "replay: the workload is not in arrival order (request ",
          i, " arrives at ", workload[i].arrival_s, " s, before request ", i - 1, " at ", workload[i - 1].arrival_s,
          " s)");
  ReplayResult result;
  result.start = result.last_token_time = engine.now();
  result.request_ids.reserve(workload.size());
  std::unordered_set<int> in_flight;  // ids of this workload's requests not finished yet (max_concurrency's count)
  std::size_t next = 0;
  const auto arrival = [&](std::size_t i) { return result.start + workload[i].arrival_s; };
  const auto slot_free = [&] {
    return options.max_concurrency == 0 || std::ssize(in_flight) < options.max_concurrency;
  };

  while (next < workload.size() || engine.has_unfinished_requests()) {
    // A request aborted from a callback emits no finishing token; once the engine is empty none is in flight.
    if (!engine.has_unfinished_requests()) in_flight.clear();
    for (; next < workload.size() && arrival(next) <= engine.now() && slot_free(); ++next) {
      const WorkloadRequest& w = workload[next];
      const int id = options.add ? options.add(engine, w, next, arrival(next))
                                 : engine.add_request(w.prompt_ids, SamplingParams{}, w.max_tokens, {}, arrival(next));
      result.request_ids.push_back(id);
      in_flight.insert(id);
    }
    if (!engine.has_unfinished_requests()) {
      idle_until(engine, arrival(next));
      continue;
    }
    const std::vector<RequestOutput> outputs = engine.step();
    ++result.num_steps;
    for (const RequestOutput& out : outputs)
      if (out.finish_reason != FinishReason::NONE) in_flight.erase(out.request_id);
    if (!outputs.empty()) {
      result.num_tokens += std::ssize(outputs);
      result.last_token_time = engine.now();
    }
    if (options.on_step) options.on_step(engine, engine.last_step(), outputs);
    if (engine.last_step().num_scheduled_requests == 0 && engine.has_unfinished_requests()) {
      // Stepping again would schedule nothing again: only a new arrival can change the engine's state.
      const StepStats& s = engine.last_step();
      check(next < workload.size() && slot_free(), "replay: the engine could schedule none of its ",
            s.num_waiting + s.num_running, " unfinished requests (", s.num_used_blocks, " of ", engine.num_blocks(),
            " KV blocks in use), and no arrival is left that could change that");
      idle_until(engine, arrival(next));
    }
  }
  return result;
}

}  // namespace servelab
