// SPDX-License-Identifier: MIT
#include "http/engine_loop.h"

#include <algorithm>

#include "core/error.h"
#include "core/timer.h"
#include "serve/metrics.h"

namespace servelab {

RequestStream::Update RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const auto has_news = [&] { return taken_ < tokens_.size() || finished_ || (admitted_ && !admission_reported_); };
  changed_.wait_for(lock, timeout, has_news);
  return take_locked();
}

RequestStream::Update RequestStream::take() {
  std::lock_guard lock(mutex_);
  return take_locked();
}

RequestStream::Update RequestStream::take_locked() {
  Update u;
  u.tokens.assign(tokens_.begin() + static_cast<std::ptrdiff_t>(taken_), tokens_.end());
  taken_ = tokens_.size();
  u.admitted = admitted_;
  admission_reported_ = admitted_;
  u.finished = finished_;
  u.finish_reason = finish_reason_;
  u.error = error_;
  return u;
}

bool RequestStream::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

EngineLoop::EngineLoop(Engine& engine, std::chrono::microseconds batch_wait)
    : engine_(engine), batch_wait_(batch_wait) {
  check(batch_wait >= std::chrono::microseconds(0) && batch_wait <= std::chrono::seconds(1),
        "--batch-wait-us must be in [0, 1000000], got ", batch_wait.count());
  update_gauges();
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() { shutdown(); }

std::shared_ptr<RequestStream> EngineLoop::submit(EngineRequest request) {
  auto stream = std::make_shared<RequestStream>();
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      pending_.push_back({std::move(request), stream, now_seconds()});
      wake_ = true;
      work_.notify_one();
      return stream;
    }
  }
  std::lock_guard lock(stream->mutex_);
  stream->finished_ = true;
  stream->finish_reason_ = FinishReason::ABORT;
  stream->error_ = "the server is shutting down";
  return stream;
}

void EngineLoop::abort(RequestStream& stream, FinishReason reason) {
  {
    std::lock_guard lock(stream.mutex_);
    if (stream.finished_ || stream.cancelled_) return;
    stream.cancelled_ = true;
    stream.cancel_reason_ = reason;
  }
  std::lock_guard lock(mutex_);
  wake_ = true;
  work_.notify_one();
}

void EngineLoop::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    work_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

std::string EngineLoop::metrics_text() const {
  std::lock_guard lock(mutex_);
  return metrics_.render();
}

EngineLoopStats EngineLoop::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void EngineLoop::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      // Sleep only when the engine is idle; a running batch steps again at once.
      const bool idle = !engine_.has_unfinished_requests();
      work_.wait(lock, [&] { return stopping_ || wake_ || engine_.has_unfinished_requests(); });
      if (idle) gather_burst(lock);
      wake_ = false;
      if (stopping_) break;
    }
    admit_pending();
    abort_cancelled();
    if (engine_.has_unfinished_requests()) deliver(engine_.step());
    update_gauges();
    end_streams();
    announce_step();
  }
  // Shutdown aborts: queued requests are refused, running ones end with finish_reason "abort".
  std::vector<Pending> pending;
  {
    std::lock_guard lock(mutex_);
    pending.swap(pending_);
  }
  for (auto& p : pending) {
    std::lock_guard lock(p.stream->mutex_);
    p.stream->error_ = "the server is shutting down";
    p.stream->finished_ = true;
    p.stream->finish_reason_ = FinishReason::ABORT;
    p.stream->changed_.notify_all();
  }
  for (auto& s : active_) {
    engine_.abort_request(s->request_id_);
    record_finished(engine_.request(s->request_id_), FinishReason::ABORT);
    engine_.release_request(s->request_id_);
    ended_.emplace_back(s, FinishReason::ABORT);
  }
  active_.clear();
  update_gauges();
  end_streams();
  announce_step();
}

void EngineLoop::gather_burst(std::unique_lock<std::mutex>& lock) {
  // Clients that arrive together (a burst, or a batch of streams that all finished in one step and send
  // their next requests at once) reach the handlers over a millisecond or two. Stepping at the first
  // arrival would prefill it alone and the rest a whole prefill later, in smaller, slower batches.
  // vLLM's V0 scheduler had the same pause before prefills (--scheduler-delay-factor).
  if (batch_wait_.count() == 0 || pending_.empty()) return;
  const auto give_up = std::chrono::steady_clock::now() + 10 * batch_wait_;
  const std::size_t full = static_cast<std::size_t>(engine_.config().scheduler.max_num_seqs);
  for (std::size_t seen = 0; seen != pending_.size() && pending_.size() < full && !stopping_;) {
    seen = pending_.size();
    const auto until = std::min(give_up, std::chrono::steady_clock::now() + batch_wait_);
    work_.wait_until(lock, until, [&] { return stopping_ || pending_.size() != seen; });
  }
}

void EngineLoop::on_step(std::function<void(bool)> listener) {
  std::lock_guard lock(mutex_);
  on_step_ = std::move(listener);
}

void EngineLoop::announce_step() {
  std::lock_guard lock(mutex_);
  if (on_step_) on_step_(news_);
  news_ = false;
}

void EngineLoop::admit_pending() {
  std::vector<Pending> pending;
  {
    std::lock_guard lock(mutex_);
    pending.swap(pending_);
  }
  for (auto& p : pending) {
    RequestStream& s = *p.stream;
    {
      std::lock_guard lock(s.mutex_);
      if (s.cancelled_) {  // the client left before the engine saw the request
        s.finished_ = true;
        s.finish_reason_ = s.cancel_reason_;
        s.changed_.notify_all();
        continue;
      }
    }
    try {
      // Arrival is when the handler submitted it, not this step boundary: the wait for the step in flight
      // (a long prefill's whole length) is part of the request's queue time and TTFT.
      const double arrival = std::max(0.0, engine_.now() - (now_seconds() - p.submitted));
      const int id = engine_.add_request(p.request.prompt, p.request.sampling, p.request.max_tokens,
                                         p.request.stop_token_ids, arrival);
      std::lock_guard lock(s.mutex_);
      s.request_id_ = id;
      s.admitted_ = true;
      s.changed_.notify_all();
      active_.push_back(p.stream);
    } catch (const Error& e) {
      std::lock_guard lock(s.mutex_);
      s.error_ = e.what();
      s.finished_ = true;
      s.finish_reason_ = FinishReason::ABORT;
      s.changed_.notify_all();
    }
  }
}

void EngineLoop::abort_cancelled() {
  std::erase_if(active_, [&](const std::shared_ptr<RequestStream>& s) {
    FinishReason reason;
    {
      std::lock_guard lock(s->mutex_);
      if (!s->cancelled_) return false;
      reason = s->cancel_reason_;
    }
    // Engine::abort_request frees the request's blocks now; the request is then forgotten.
    engine_.abort_request(s->request_id_);
    record_finished(engine_.request(s->request_id_), reason);
    engine_.release_request(s->request_id_);
    ended_.emplace_back(s, reason);
    return true;
  });
}

void EngineLoop::deliver(const std::vector<RequestOutput>& outputs) {
  for (const RequestOutput& out : outputs) {
    const auto it =
        std::find_if(active_.begin(), active_.end(), [&](const auto& s) { return s->request_id_ == out.request_id; });
    if (it == active_.end()) continue;  // not a served request (cannot happen: every request comes from submit())
    const std::shared_ptr<RequestStream> s = *it;
    {
      std::lock_guard lock(s->mutex_);
      news_ = news_ || s->tokens_.empty();
      s->tokens_.push_back(out.token);
      s->changed_.notify_all();
    }
    if (out.finish_reason == FinishReason::NONE) continue;
    record_finished(engine_.request(out.request_id), out.finish_reason);
    engine_.release_request(out.request_id);
    ended_.emplace_back(s, out.finish_reason);
    active_.erase(it);
  }
}

void EngineLoop::end_streams() {
  news_ = news_ || !ended_.empty();
  for (auto& [s, reason] : ended_) finish_stream(*s, reason);
  ended_.clear();
}

void EngineLoop::finish_stream(RequestStream& s, FinishReason reason) {
  std::lock_guard lock(s.mutex_);
  s.finished_ = true;
  s.finish_reason_ = reason;
  s.changed_.notify_all();
}

void EngineLoop::record_finished(const Request& r, FinishReason reason) {
  std::lock_guard lock(mutex_);
  metrics_.prompt_tokens += static_cast<std::uint64_t>(r.num_prompt_tokens());
  metrics_.generation_tokens += static_cast<std::uint64_t>(r.num_output_tokens());
  ++metrics_.finished[reason == FinishReason::STOP ? 0 : reason == FinishReason::LENGTH ? 1 : 2];
  if (r.times.token_times.empty() || r.times.first_scheduled < 0) return;  // aborted before its first token
  const RequestMetrics m = RequestMetrics::from(r.times);
  metrics_.ttft.observe(m.ttft);
  metrics_.e2e.observe(m.e2e);
  metrics_.queue_time.observe(m.queue_time);
  if (m.output_tokens >= 2) metrics_.tpot.observe(m.tpot);
  for (double gap : m.itl) metrics_.itl.observe(gap);
}

void EngineLoop::update_gauges() {
  const Scheduler& sched = engine_.scheduler();
  const BlockPool& pool = engine_.kv_cache_manager().block_pool();
  std::lock_guard lock(mutex_);
  metrics_.num_running = static_cast<int>(sched.running().size());
  metrics_.num_waiting = static_cast<int>(sched.waiting().size());
  metrics_.num_preemptions = sched.num_preemptions();
  metrics_.kv_blocks_free = pool.num_free_blocks();
  metrics_.kv_blocks_used = engine_.num_blocks() - pool.num_free_blocks();
  metrics_.prefix_cache_queries = engine_.kv_cache_manager().prefix_cache_queries();
  metrics_.prefix_cache_hits = engine_.kv_cache_manager().prefix_cache_hits();
  stats_.num_requests = static_cast<int>(engine_.requests().size());
  stats_.num_blocks = engine_.num_blocks();
  stats_.num_free_blocks = pool.num_free_blocks();
  stats_.num_pending = static_cast<int>(pending_.size());
}

}  // namespace servelab
