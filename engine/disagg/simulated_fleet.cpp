#include "disagg/simulated_fleet.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "core/error.h"

namespace servelab::disagg {

namespace {

// One arrival at an instance: when, and which workload request.
struct Arrival {
  double time = 0;
  std::size_t index = 0;
};

// Runs @p engine until every arrival has been added (by @p add, at its time) and served.
// Returns the times of each arrival's request, in @p arrivals' order (sorted by time).
std::vector<RequestTimes> drive(Engine& engine, const std::vector<Arrival>& arrivals,
                                const std::function<int(const Arrival&)>& add) {
  std::vector<int> ids;
  std::size_t next = 0;
  while (next < arrivals.size() || engine.has_unfinished_requests()) {
    if (!engine.has_unfinished_requests()) engine.advance_clock_to(arrivals[next].time);
    for (; next < arrivals.size() && arrivals[next].time <= engine.now(); ++next) ids.push_back(add(arrivals[next]));
    engine.step();
    if (engine.last_step().num_scheduled_requests == 0) {
      // Nothing could run: only an arrival can change that.
      check(next < arrivals.size(), "simulated fleet: an instance holds requests it can never schedule");
      engine.advance_clock_to(arrivals[next].time);
    }
  }
  std::vector<RequestTimes> out;
  for (int id : ids) out.push_back(engine.request(id).times);
  return out;
}

// Round robin: request i goes to instance i mod n.
std::vector<std::vector<Arrival>> round_robin(const std::vector<WorkloadRequest>& workload, int n) {
  std::vector<std::vector<Arrival>> out(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < workload.size(); ++i) out[i % out.size()].push_back({workload[i].arrival_s, i});
  return out;
}

}  // namespace

std::string FleetShape::describe() const {
  if (num_prefill == 0) return "colocated x" + std::to_string(num_decode);
  return std::to_string(num_prefill) + "P" + std::to_string(num_decode) + "D";
}

FleetRun simulate_fleet(const SimulatedModel& model, const FleetConfig& config,
                        const std::vector<WorkloadRequest>& workload) {
  const FleetShape& shape = config.shape;
  check(shape.num_decode >= 1 && shape.num_prefill >= 0, "simulated fleet ", shape.describe(),
        ": needs at least one decode (or colocated) instance and no negative count");
  check(config.link_bytes_per_second >= 0 && config.kv_bytes_per_token >= 0 && config.transfer_overhead_s >= 0,
        "simulated fleet: link rate, KV bytes per token and transfer overhead must be >= 0");
  for (std::size_t i = 1; i < workload.size(); ++i)
    check(workload[i].arrival_s >= workload[i - 1].arrival_s, "simulated fleet: the workload is not in arrival order");
  FleetRun run;
  run.times.resize(workload.size());
  const auto fresh = [&](const Arrival& a, Engine& e, int max_tokens) {
    return e.add_request(workload[a.index].prompt_ids, SamplingParams{}, max_tokens, {}, workload[a.index].arrival_s);
  };

  if (shape.num_prefill == 0) {
    for (const std::vector<Arrival>& mine : round_robin(workload, shape.num_decode)) {
      Engine engine(model, config.colocated);
      const std::vector<RequestTimes> times =
          drive(engine, mine, [&](const Arrival& a) { return fresh(a, engine, workload[a.index].max_tokens); });
      for (std::size_t k = 0; k < mine.size(); ++k) run.times[mine[k].index] = times[k];
    }
    return run;
  }

  run.transfer_seconds.resize(workload.size());
  // 1. Prefill instances: each request wants the first token only.
  for (const std::vector<Arrival>& mine : round_robin(workload, shape.num_prefill)) {
    Engine engine(model, config.prefill);
    const std::vector<RequestTimes> times = drive(engine, mine, [&](const Arrival& a) { return fresh(a, engine, 1); });
    // 2. Its link: transfers leave in the order their prefills ended, one at a time.
    std::vector<std::size_t> order(mine.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(),
              [&](std::size_t x, std::size_t y) { return times[x].token_times.at(0) < times[y].token_times.at(0); });
    double link_free = 0;
    for (std::size_t k : order) {
      const WorkloadRequest& w = workload[mine[k].index];
      const double done_prefill = times[k].token_times.at(0);
      const double bytes = config.kv_bytes_per_token * static_cast<double>(w.prompt_ids.size());
      const double start = std::max(done_prefill, link_free);
      const double end = start + config.transfer_overhead_s +
                         (config.link_bytes_per_second > 0 ? bytes / config.link_bytes_per_second : 0.0);
      link_free = end;
      run.transfer_seconds[mine[k].index] = end - done_prefill;  // from the end of prefill: the link's queue counts
      RequestTimes& t = run.times[mine[k].index];
      t = times[k];
      t.token_times.assign(1, end);  // the first token reaches the client with the KV
      if (w.max_tokens == 1) t.finished = end;
    }
  }
  // 3. Decode instances: round robin in the order the KV arrives.
  std::vector<std::size_t> by_ready;
  for (std::size_t i = 0; i < workload.size(); ++i)
    if (workload[i].max_tokens > 1) by_ready.push_back(i);
  std::stable_sort(by_ready.begin(), by_ready.end(), [&](std::size_t x, std::size_t y) {
    return run.times[x].token_times[0] < run.times[y].token_times[0];
  });
  std::vector<std::vector<Arrival>> decode_arrivals(static_cast<std::size_t>(shape.num_decode));
  for (std::size_t k = 0; k < by_ready.size(); ++k)
    decode_arrivals[k % decode_arrivals.size()].push_back({run.times[by_ready[k]].token_times[0], by_ready[k]});
  for (const std::vector<Arrival>& mine : decode_arrivals) {
    Engine engine(model, config.decode);
    const std::vector<RequestTimes> times = drive(engine, mine, [&](const Arrival& a) {
      const WorkloadRequest& w = workload[a.index];
      return engine.add_prefilled_request(w.prompt_ids, SamplingParams{}, w.max_tokens, 0, w.arrival_s, a.time);
    });
    for (std::size_t k = 0; k < mine.size(); ++k) {
      RequestTimes& t = run.times[mine[k].index];
      const double first_scheduled = t.first_scheduled;
      t = times[k];
      t.first_scheduled = first_scheduled;  // the prefill's start, not the decode's
    }
  }
  return run;
}

}  // namespace servelab::disagg
