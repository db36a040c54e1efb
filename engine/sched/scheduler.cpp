// SPDX-License-Identifier: MIT
#include "sched/scheduler.h"

#include <algorithm>

#include "core/enum_names.h"
#include "core/error.h"

namespace servelab {

constexpr EnumNames<SchedulingPolicy, 3> kPolicies{{{{SchedulingPolicy::ONE_AT_A_TIME, "one_at_a_time"},
                                                     {SchedulingPolicy::STATIC, "static"},
                                                     {SchedulingPolicy::CONTINUOUS, "continuous"}}}};

const char* to_string(SchedulingPolicy policy) { return kPolicies.name(policy); }

SchedulingPolicy parse_scheduling_policy(const std::string& text, const std::string& what) {
  return kPolicies.parse(text, what);
}

Scheduler::Scheduler(const SchedulerConfig& config, KVCacheManager& kv_cache_manager,
                     std::function<void(const std::string&)> log)
    : config_(config), kv_(kv_cache_manager), log_(std::move(log)) {
  check(config.max_num_seqs >= 1, "--max-num-seqs must be >= 1, got ", config.max_num_seqs);
  check(config.max_num_batched_tokens >= 1, "--max-num-batched-tokens must be >= 1, got ",
        config.max_num_batched_tokens);
  check(config.long_prefill_token_threshold >= 0, "--long-prefill-token-threshold must be >= 0, got ",
        config.long_prefill_token_threshold);
}

void Scheduler::add_request(Request* request) {
  if (request->status != RequestStatus::WAITING_FOR_REMOTE_KV) request->status = RequestStatus::WAITING;
  waiting_.push_back(request);
}

bool Scheduler::abort_request(Request* request, double now) {
  if (request->is_finished()) return false;
  std::erase(waiting_, request);
  std::erase(running_, request);
  kv_.free(*request);
  request->finish(FinishReason::ABORT, now);
  return true;
}

void Scheduler::remove_finished(Request* request) {
  check(request->is_finished(), "scheduler: request ", request->request_id, " has not finished");
  std::erase(waiting_, request);
  std::erase(running_, request);
  if (!config_.hold_finished_kv) kv_.free(*request);
}

void Scheduler::preempt(Request* victim) {
  // BEGIN LAB04 SOLUTION: Scheduler::preempt, preemption by recompute
  std::erase(running_, victim);
  const int blocks = kv_.block_table(victim->request_id).num_blocks();
  if (log_)
    log_("preempted request " + std::to_string(victim->request_id) + ": out of KV blocks; " + std::to_string(blocks) +
         " blocks freed, " + std::to_string(victim->num_computed_tokens) + " computed tokens thrown away");
  kv_.free(*victim);
  victim->status = RequestStatus::PREEMPTED;
  victim->num_computed_tokens = 0;
  ++victim->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(victim);  // first in line again: it arrived before anyone still waiting
  // END LAB04 SOLUTION
}

bool Scheduler::may_admit() const {
  // Static and one-at-a-time batches are formed only when the previous one has drained.
  return config_.policy == SchedulingPolicy::CONTINUOUS || running_.empty();
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int budget = config_.max_num_batched_tokens;
  // Tokens a request with `uncomputed` tokens gets in this step; 0 = none this step.
  const auto tokens_for = [&](int uncomputed) {
    if (config_.enable_chunked_prefill) {
      // BEGIN LAB06 SOLUTION: Scheduler::schedule, the chunk of a request within the token budget (and --long-prefill-token-threshold)
      int n = std::min(uncomputed, budget);
      if (config_.long_prefill_token_threshold > 0) n = std::min(n, config_.long_prefill_token_threshold);
      return n;
      // END LAB06 SOLUTION
    }
    // Whole requests only. One larger than the budget would never run: it may run alone.
    return uncomputed <= budget || out.scheduled.empty() ? uncomputed : 0;
  };

  // 1. Running requests, oldest first; preempt the newest when blocks run out.
  for (std::size_t i = 0; i < running_.size();) {
    Request* r = running_[i];
    const int n = tokens_for(r->num_uncomputed_tokens());
    if (n == 0) {
      ++i;  // waits for a later step
      continue;
    }
    bool allocated = false;
    // BEGIN LAB04 SOLUTION: Scheduler::schedule, make room for a running request by preempting the newest
    while (!(allocated = kv_.allocate_slots(*r, n).has_value())) {
      Request* victim = running_.back();  // the newest; never one already scheduled in this step (index < i)
      out.preempted_request_ids.push_back(victim->request_id);
      preempt(victim);
      if (victim == r) break;
    }
    // END LAB04 SOLUTION
    if (!allocated) break;  // r was the newest and is now waiting: nothing runs after it
    out.scheduled.push_back({r, n});
    out.total_num_scheduled_tokens += n;
    budget -= n;
    ++i;
  }

  // 2. Waiting requests in arrival order (FCFS); none when this step had to preempt.
  // BEGIN LAB04 SOLUTION: Scheduler::schedule, admit waiting requests in FCFS order while the seats and blocks allow
  if (out.preempted_request_ids.empty() && may_admit()) {
    const std::size_t limit =
        config_.policy == SchedulingPolicy::ONE_AT_A_TIME ? 1 : static_cast<std::size_t>(config_.max_num_seqs);
    for (auto it = waiting_.begin(); it != waiting_.end() && running_.size() < limit;) {
      Request* r = *it;
      if (r->status == RequestStatus::WAITING_FOR_REMOTE_KV) {
        ++it;  // its KV is on its way from another worker: the ones behind it may go
        continue;
      }
      // Prefix caching: start past the cached prefix (nothing with caching off).
      const KVCacheManager::ComputedBlocks hit = kv_.get_computed_blocks(*r);
      r->num_computed_tokens += hit.num_tokens;
      const int n = tokens_for(r->num_uncomputed_tokens());
      if (n == 0 || !kv_.allocate_slots(*r, n, hit)) {
        r->num_computed_tokens -= hit.num_tokens;
        break;  // FCFS: nobody overtakes the head
      }
      it = waiting_.erase(it);
      r->status = RequestStatus::RUNNING;
      running_.push_back(r);
      out.scheduled.push_back({r, n});
      out.total_num_scheduled_tokens += n;
      budget -= n;
    }
  }
  // END LAB04 SOLUTION
  return out;
}

std::vector<Request*> Scheduler::update_from_output(const SchedulerOutput& output,
                                                    const std::vector<std::int32_t>& sampled, double now,
                                                    bool keep_kv) {
  std::vector<Request*> finished;
  std::size_t next = 0;
  for (const ScheduledRequest& s : output.scheduled) {
    Request* r = s.request;
    if (s.num_new_tokens < r->num_uncomputed_tokens()) {  // only with chunked prefill: a chunk of a longer prompt
      // BEGIN LAB06 SOLUTION: Scheduler::update_from_output, a prompt chunk that does not catch up: its progress is kept, nothing is sampled
      r->num_computed_tokens += s.num_new_tokens;  // its KV is in the cache: the next chunk starts after it
      continue;                                    // no token: the chunk's last row is not the sequence's last
      // END LAB06 SOLUTION
    }
    r->num_computed_tokens += s.num_new_tokens;
    if (keep_kv) kv_.cache_blocks(*r);                // its newly full blocks can now be shared (prefix caching)
    if (r->num_computed_tokens == r->num_tokens()) {  // caught up with its tokens: the step sampled one
      check(next < sampled.size(), "update_from_output: fewer sampled tokens than requests that caught up");
      r->append_output_token(sampled[next++], now);
    }
    if (!keep_kv) r->num_computed_tokens = 0;
    if (r->is_finished()) {
      if (!config_.hold_finished_kv) kv_.free(*r);
      std::erase(running_, r);
      finished.push_back(r);
    }
  }
  check(next == sampled.size(), "update_from_output: ", sampled.size(), " sampled tokens for ", next,
        " requests that caught up");
  return finished;
}

}  // namespace servelab
