// SPDX-License-Identifier: MIT
/**
 * @file scheduler_sim.h
 * @brief Drives a Scheduler by hand with no model: requests named A, B, C...,
 *        each step's plan written "A:3 B:1" (A computes 3 tokens, B 1), and
 *        made-up sampled tokens, so a test reads like a timeline.
 */
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace servelab::test {

/// Token ids.
using Ids = std::vector<std::int32_t>;

/// A scheduler over its own KV blocks, with requests named A, B, C... in order of arrival.
struct Sim {
  KVCacheManager kv;
  std::vector<std::string> log;
  Scheduler scheduler;
  std::deque<Request> requests;  // deque: addresses stay put as requests are added
  SchedulerOutput last;          // the most recent step's plan

  Sim(SchedulingPolicy policy, int max_num_seqs, int max_num_batched_tokens, int num_blocks, int block_size)
      : Sim(
            SchedulerConfig{
                .policy = policy, .max_num_seqs = max_num_seqs, .max_num_batched_tokens = max_num_batched_tokens},
            num_blocks, block_size) {}
  Sim(const SchedulerConfig& config, int num_blocks, int block_size)
      : kv(num_blocks, block_size), scheduler(config, kv, [this](const std::string& line) { log.push_back(line); }) {}

  /// Queues a request of @p prompt_len prompt tokens that stops after @p max_tokens outputs.
  Request& add(int prompt_len, int max_tokens) {
    const int id = static_cast<int>(requests.size());
    Ids prompt(static_cast<std::size_t>(prompt_len));
    for (int i = 0; i < prompt_len; ++i) prompt[static_cast<std::size_t>(i)] = 10 * id + i;
    requests.emplace_back(id, prompt, SamplingParams{}, max_tokens, Ids{}, 0.0);
    scheduler.add_request(&requests.back());
    return requests.back();
  }

  /// The made-up token request @p r samples next: 100 * (id + 1) + its output count (A: 100, 101, ...).
  static std::int32_t fake_token(const Request& r) { return 100 * (r.request_id + 1) + r.num_output_tokens(); }

  /// schedule() then update_from_output() with fake tokens; returns the plan, e.g. "A:3 B:1" ("" = nothing ran).
  std::string step() {
    last = scheduler.schedule();
    std::string plan;
    Ids sampled;
    for (const ScheduledRequest& s : last.scheduled) {
      if (!plan.empty()) plan += ' ';
      plan += name(s.request->request_id) + ":" + std::to_string(s.num_new_tokens);
      // A request that catches up with its tokens samples one (a prompt chunk short of the end does not).
      if (s.request->num_computed_tokens + s.num_new_tokens == s.request->num_tokens())
        sampled.push_back(fake_token(*s.request));
    }
    scheduler.update_from_output(last, sampled, 0.0);
    return plan;
  }

  static std::string name(int id) { return std::string(1, static_cast<char>('A' + id)); }
  /// Names of @p queue separated by spaces.
  template <typename Queue>
  static std::string names(const Queue& queue) {
    std::string s;
    for (const Request* r : queue) {
      if (!s.empty()) s += ' ';
      s += name(r->request_id);
    }
    return s;
  }

  /// Waiting queue as names, front first, e.g. "B C".
  std::string waiting() const { return names(scheduler.waiting()); }
  /// Running set as names, oldest first.
  std::string running() const { return names(scheduler.running()); }
  Ids outputs(const Request& r) const { return Ids(r.output_token_ids().begin(), r.output_token_ids().end()); }
  Ids table(const Request& r) const { return kv.block_table(r.request_id).block_ids(); }
  bool all_blocks_free() const { return kv.block_pool().num_free_blocks() == kv.block_pool().num_blocks(); }
};

}  // namespace servelab::test
