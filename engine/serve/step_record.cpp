// SPDX-License-Identifier: MIT
/**
 * @file step_record.cpp
 * @brief The engine's side of serve/step_observer.h: attaching observers and
 *        building each step's record from what the step left behind.
 */
#include <algorithm>

#include "serve/engine.h"

namespace servelab {

void Engine::add_observer(StepObserver* observer) {
  if (observer && std::find(observers_.begin(), observers_.end(), observer) == observers_.end())
    observers_.push_back(observer);
}

void Engine::remove_observer(StepObserver* observer) { std::erase(observers_, observer); }

bool Engine::observing() const {
  return std::any_of(observers_.begin(), observers_.end(), [](const StepObserver* o) { return o->active(); });
}

void Engine::notify_request(const RequestEvent& event) {
  for (StepObserver* o : observers_) o->on_request(event);
}

void Engine::notify_step(const SchedulerOutput& out, const std::vector<RequestOutput>& outputs) {
  StepRecord r;
  r.step = num_steps_;
  r.simulated = sim_.has_value();
  r.start = last_.start;
  r.end = now();
  r.schedule_seconds = last_.schedule_seconds - (sim_ ? 0 : last_.update_seconds);
  r.forward_seconds = last_.forward_seconds - last_.sample_seconds;
  r.sample_seconds = last_.sample_seconds;
  r.update_seconds = last_.update_seconds;
  r.num_prefill_tokens = last_.num_prefill_tokens;
  r.num_decode_tokens = last_.num_decode_tokens;
  // A victim's computed tokens are 0 by now; what it had after the previous step is what was thrown away.
  for (int id : out.preempted_request_ids) {
    const auto seen = computed_seen_.find(id);
    r.preempted.push_back({id, seen == computed_seen_.end() ? 0 : seen->second});
    if (seen != computed_seen_.end()) computed_seen_.erase(seen);
  }
  for (const ScheduledRequest& s : out.scheduled) {
    const Request& q = *s.request;
    const auto seen = computed_seen_.find(q.request_id);
    StepShare share{q.request_id, s.num_new_tokens, seen == computed_seen_.end() ? 0 : seen->second};
    if (!config_.enable_kv_cache) share.num_computed_before = 0;  // every step recomputes the whole sequence
    computed_seen_[q.request_id] = q.num_computed_tokens;
    r.scheduled.push_back(share);
  }
  std::size_t next = 0;  // outputs are in batch order, one per sampled request
  for (StepShare& share : r.scheduled) {
    if (next == outputs.size() || outputs[next].request_id != share.request_id) continue;
    const RequestOutput& o = outputs[next++];
    share.sampled = true;
    const Request& q = *requests_.at(o.request_id);
    share.decode = share.num_new_tokens == 1 && q.num_output_tokens() > 1;
    if (q.num_output_tokens() == 1) r.first_token.push_back(o.request_id);
    if (o.finish_reason != FinishReason::NONE) {
      r.finished.push_back(o.request_id);
      r.finish_reasons.push_back(o.finish_reason);
      computed_seen_.erase(o.request_id);
    }
  }
  for (const Request* q : scheduler_->running()) r.running.push_back(q->request_id);
  for (const Request* q : scheduler_->waiting()) r.waiting.push_back(q->request_id);
  const BlockPool& pool = kv_manager_->block_pool();
  r.num_blocks = pool.num_blocks();
  r.num_free_blocks = pool.num_free_blocks();
  r.num_used_blocks_forward = last_.num_used_blocks;
  // Holders: the queues, and finished requests only when they keep their KV (a prefill worker).
  const auto add_holder = [&](int id) {
    const BlockTable& table = kv_manager_->block_table(id);
    if (table.num_blocks() > 0) r.blocks.push_back({id, table.block_ids()});
  };
  if (config_.scheduler.hold_finished_kv) {
    for (const auto& [id, q] : requests_) add_holder(id);
  } else {
    std::vector<int> ids = r.running;
    ids.insert(ids.end(), r.waiting.begin(), r.waiting.end());
    std::sort(ids.begin(), ids.end());
    for (int id : ids) add_holder(id);
  }
  for (StepObserver* o : observers_) o->on_step(r);
}

}  // namespace servelab
