// SPDX-License-Identifier: MIT
#include "disagg/simulated_fleet.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "serve/replay.h"

namespace servelab::disagg {

namespace {

// One instance's requests, each timed by when it reaches the instance, and where each stands in the workload.
struct Share {
  std::vector<WorkloadRequest> requests;  // sorted by arrival_s: its arrival at this instance
  std::vector<std::size_t> index;         // [requests.size()] its index in the whole workload
};

// Serves @p mine on @p engine (options.add queues each request); the times of its requests, in @p mine's order.
std::vector<RequestTimes> drive(Engine& engine, const Share& mine, const ReplayOptions& options = {}) {
  std::vector<RequestTimes> out;
  for (int id : replay(engine, mine.requests, options).request_ids) out.push_back(engine.request(id).times);
  return out;
}

// Round robin: request i goes to instance i mod n.
std::vector<Share> round_robin(const std::vector<WorkloadRequest>& workload, int n) {
  std::vector<Share> out(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < workload.size(); ++i) {
    out[i % out.size()].requests.push_back(workload[i]);
    out[i % out.size()].index.push_back(i);
  }
  return out;
}

}  // namespace

std::string FleetShape::describe() const {
  if (num_prefill == 0) return "colocated x" + std::to_string(num_decode);
  return std::to_string(num_prefill) + "P" + std::to_string(num_decode) + "D";
}

FleetRun simulate_fleet(const SimulatedModel& model, const FleetConfig& config,
                        const std::vector<WorkloadRequest>& workload) {
  return simulate_fleet(model, model, config, workload);
}

FleetRun simulate_fleet(const SimulatedModel& prefill_model, const SimulatedModel& decode_model,
                        const FleetConfig& config, const std::vector<WorkloadRequest>& workload) {
  const FleetShape& shape = config.shape;
  const ModelConfig &p = prefill_model.config, &d = decode_model.config;
  check(p.name == d.name && p.num_hidden_layers == d.num_hidden_layers && p.kv_dim() == d.kv_dim(),
        "simulated fleet: the prefill and decode pools must serve the same model (", prefill_model.config.name, " vs ",
        decode_model.config.name, ")");
  check(shape.num_prefill > 0 || &prefill_model == &decode_model, "simulated fleet ", shape.describe(),
        ": a colocated fleet has one kind of GPU, so one model");
  check(shape.num_decode >= 1 && shape.num_prefill >= 0, "simulated fleet ", shape.describe(),
        ": needs at least one decode (or colocated) instance and no negative count");
  check(config.link_bytes_per_second >= 0 && config.kv_bytes_per_token >= 0 && config.transfer_overhead_s >= 0,
        "simulated fleet: link rate, KV bytes per token and transfer overhead must be >= 0");
  for (std::size_t i = 1; i < workload.size(); ++i)
    check(workload[i].arrival_s >= workload[i - 1].arrival_s, "simulated fleet: the workload is not in arrival order");
  FleetRun run;
  run.times.resize(workload.size());

  if (shape.num_prefill == 0) {
    for (const Share& mine : round_robin(workload, shape.num_decode)) {
      Engine engine(decode_model, config.colocated);
      const std::vector<RequestTimes> times = drive(engine, mine);
      for (std::size_t k = 0; k < times.size(); ++k) run.times[mine.index[k]] = times[k];
    }
    return run;
  }

  run.transfer_seconds.resize(workload.size());
  // 1. Prefill instances: each request wants the first token only.
  for (const Share& mine : round_robin(workload, shape.num_prefill)) {
    Engine engine(prefill_model, config.prefill);
    const auto first_token_only = [](Engine& e, const WorkloadRequest& w, std::size_t, double arrival) {
      return e.add_request(w.prompt_ids, SamplingParams{}, 1, {}, arrival);
    };
    const std::vector<RequestTimes> times = drive(engine, mine, {.add = first_token_only});
    // 2. Its link: transfers leave in the order their prefills ended, one at a time.
    std::vector<std::size_t> order(times.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(),
              [&](std::size_t x, std::size_t y) { return times[x].token_times.at(0) < times[y].token_times.at(0); });
    double link_free = 0;
    for (std::size_t k : order) {
      const WorkloadRequest& w = workload[mine.index[k]];
      const double done_prefill = times[k].token_times.at(0);
      const double bytes = config.kv_bytes_per_token * static_cast<double>(w.prompt_ids.size());
      const double start = std::max(done_prefill, link_free);
      const double end = start + config.transfer_overhead_s +
                         (config.link_bytes_per_second > 0 ? bytes / config.link_bytes_per_second : 0.0);
      link_free = end;
      run.transfer_seconds[mine.index[k]] = end - done_prefill;  // from the end of prefill: the link's queue counts
      RequestTimes& t = run.times[mine.index[k]];
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
  std::vector<Share> decode_shares(static_cast<std::size_t>(shape.num_decode));
  for (std::size_t k = 0; k < by_ready.size(); ++k) {
    Share& mine = decode_shares[k % decode_shares.size()];
    mine.requests.push_back(workload[by_ready[k]]);
    mine.requests.back().arrival_s = run.times[by_ready[k]].token_times[0];  // it reaches decode with its KV
    mine.index.push_back(by_ready[k]);
  }
  for (const Share& mine : decode_shares) {
    Engine engine(decode_model, config.decode);
    // Arrival for TTFT is the request's arrival at the whole fleet; the KV's arrival is when its first token was made.
    const auto prefilled = [&](Engine& e, const WorkloadRequest& w, std::size_t k, double kv_ready) {
      return e.add_prefilled_request(w.prompt_ids, SamplingParams{}, w.max_tokens, 0, workload[mine.index[k]].arrival_s,
                                     kv_ready);
    };
    const std::vector<RequestTimes> times = drive(engine, mine, {.add = prefilled});
    for (std::size_t k = 0; k < times.size(); ++k) {
      RequestTimes& t = run.times[mine.index[k]];
      const double first_scheduled = t.first_scheduled;
      t = times[k];
      t.first_scheduled = first_scheduled;  // the prefill's start, not the decode's
    }
  }
  return run;
}

}  // namespace servelab::disagg
