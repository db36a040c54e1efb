// SPDX-License-Identifier: MIT
/**
 * @file trace_schema.h
 * @brief The checks a Chrome trace of the engine must pass (trace/chrome_trace.h),
 *        for the engine's tests and the server's: event types, monotonic timestamps
 *        on every track, every request's spans closed, and block counters equal to
 *        the block tables the step events carry.
 */
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace servelab::test {

/// What a trace held, for the caller's own checks; problems lists every violation found.
struct TraceCheck {
  std::vector<std::string> problems;                ///< empty when the trace passes
  int processes = 0;                                ///< engine runs (process_name events)
  int requests = 0;                                 ///< request tracks with an "arrived" instant
  int steps = 0;                                    ///< step events
  int preemptions = 0;                              ///< preempt instants on the engine tracks
  int max_tokens_discarded = 0;                     ///< the most tokens one preemption threw away
  int prefill_chunks = 0;                           ///< "prefill chunk" spans
  bool truncated = false;                           ///< a "trace truncated" marker is present
  std::vector<std::string> process_names;           ///< in file order
  std::map<std::pair<int, long>, int> used_blocks;  ///< (pid, step) -> blocks in use, from the block tables
};

/// Checks @p trace (the parsed file). Every violation goes into problems, naming the event.
inline TraceCheck check_trace(const nlohmann::json& trace) {
  TraceCheck out;
  auto problem = [&](const std::string& what, const nlohmann::json& e) {
    if (out.problems.size() < 20) out.problems.push_back(what + ": " + e.dump().substr(0, 300));
  };
  if (!trace.is_array()) {
    out.problems.push_back("the trace is not a JSON array");
    return out;
  }
  std::map<std::pair<int, int>, double> last_ts;          // (pid, tid) -> latest ts
  std::map<std::pair<int, int>, double> span_end;         // request track -> end of its latest span
  std::map<std::pair<int, int>, bool> finished;           // request track -> finish instant seen
  std::map<int, std::map<int, std::vector<int>>> tables;  // pid -> request -> block ids
  std::map<int, std::pair<long, long>> blocks_counter;    // pid -> latest kv blocks {used, free}
  std::map<int, int> pool_size;                           // pid -> nb from the step events
  for (const auto& e : trace) {
    const std::string ph = e.value("ph", "");
    if (!e.contains("name") || !e["name"].is_string() || !e.contains("pid") || !e.contains("tid")) {
      problem("an event without name, pid or tid", e);
      continue;
    }
    const std::string name = e["name"];
    const int pid = e["pid"], tid = e["tid"];
    if (ph == "M") {
      if (name == "process_name") out.processes++, out.process_names.push_back(e["args"]["name"]);
      continue;
    }
    if (ph != "X" && ph != "i" && ph != "C") {
      problem("event type " + ph + " is not one the engine writes (X, i, C, M)", e);
      continue;
    }
    if (!e.contains("ts") || !e["ts"].is_number()) {
      problem("no numeric ts", e);
      continue;
    }
    const double ts = e["ts"];
    if (name == "trace truncated (cap reached)") {
      out.truncated = true;
      continue;
    }
    const auto track =
        std::make_pair(pid, ph == "C" ? -1 - static_cast<int>(std::hash<std::string>{}(name) % 1000) : tid);
    if (auto it = last_ts.find(track); it != last_ts.end() && ts < it->second - 1e-3)
      problem("timestamp goes back on its track", e);
    last_ts[track] = ts;
    if (ph == "X" && (!e.contains("dur") || e["dur"].get<double>() < 0)) problem("a span without dur >= 0", e);
    if (ph == "C") {
      if (name == "kv blocks") {
        blocks_counter[pid] = {e["args"]["used"], e["args"]["free"]};
        long used = 0;
        for (const auto& [id, blocks] : tables[pid]) used += static_cast<long>(blocks.size());
        if (used != e["args"]["used"].get<long>()) problem("the kv blocks counter differs from the block tables", e);
      }
      continue;
    }
    if (tid == 0) {
      if (name == "preempt") {
        out.preemptions++;
        out.max_tokens_discarded = std::max(out.max_tokens_discarded, e["args"]["tokens_discarded"].get<int>());
      }
      if (name != "step") continue;
      out.steps++;
      const auto& a = e["args"];
      auto& t = tables[pid];
      for (const auto& id : a["freed"]) t.erase(id.get<int>());
      for (const auto& [id, blocks] : a["blocks"].items()) t[std::stoi(id)] = blocks.get<std::vector<int>>();
      std::set<int> distinct;
      int used = 0;
      for (const auto& [id, blocks] : t) {
        used += static_cast<int>(blocks.size());
        distinct.insert(blocks.begin(), blocks.end());
      }
      if (static_cast<int>(distinct.size()) != used) problem("a block is in two requests' tables", e);
      if (used != a["nb"].get<int>() - a["free"].get<int>())
        problem("the block tables hold " + std::to_string(used) + " blocks but the step says nb - free = " +
                    std::to_string(a["nb"].get<int>() - a["free"].get<int>()),
                e);
      out.used_blocks[{pid, a["step"].get<long>()}] = used;
      pool_size[pid] = a["nb"];
      continue;
    }
    // A request's track: arrived, then spans that do not overlap, then one finish.
    const auto rt = std::make_pair(pid, tid);
    if (name == "arrived") {
      out.requests++;
      span_end[rt] = ts;
      continue;
    }
    if (!span_end.count(rt)) problem("an event on a request track before its arrival", e);
    if (finished[rt]) problem("an event after the request finished", e);
    if (ph == "X") {
      if (ts < span_end[rt] - 1e-3) problem("a span that starts before the previous one ended", e);
      span_end[rt] = ts + e["dur"].get<double>();
    }
    if (name.starts_with("finish")) {
      finished[rt] = true;
      if (span_end[rt] > ts + 1e-3) problem("a span still open at the request's finish", e);
    }
    if (name == "prefill chunk") out.prefill_chunks++;
  }
  if (!out.truncated) {
    for (const auto& [rt, end] : span_end)
      if (!finished[rt])
        out.problems.push_back("request track " + std::to_string(rt.second) + " of process " +
                               std::to_string(rt.first) + " never finishes");
  }
  // The counter is written when it moves: its last value is the last step's.
  for (const auto& [pid, c] : blocks_counter) {
    long used = 0;
    for (const auto& [id, blocks] : tables[pid]) used += static_cast<long>(blocks.size());
    if (!out.truncated && c.first != used)
      out.problems.push_back("process " + std::to_string(pid) + ": the kv blocks counter ends at " +
                             std::to_string(c.first) + " used but the tables hold " + std::to_string(used));
    if (pool_size.count(pid) && c.first + c.second != pool_size[pid])
      out.problems.push_back("process " + std::to_string(pid) + ": used + free != the pool's blocks");
  }
  return out;
}

}  // namespace servelab::test
