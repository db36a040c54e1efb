// SPDX-License-Identifier: MIT
#include "http/dashboard.h"

#include <algorithm>

#include "trace/step_json.h"

namespace servelab {

std::string Dashboard::Viewer::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !queue_.empty() || closed_.load(); });
  if (queue_.empty()) return {};
  std::string out = "data: {\"dropped\":" + std::to_string(dropped_) + ",\"records\":[";
  for (std::size_t i = 0; i < queue_.size(); ++i) {
    if (i) out += ',';
    out += queue_[i];
  }
  out += "]}\n\n";
  queue_.clear();
  dropped_ = 0;
  return out;
}

Dashboard::Dashboard(Limits limits) : limits_(limits) {}

std::shared_ptr<Dashboard::Viewer> Dashboard::connect() {
  const std::lock_guard lock(viewers_mutex_);
  if (closed_ || static_cast<int>(viewers_.size()) >= limits_.max_viewers) return nullptr;
  auto viewer = std::make_shared<Viewer>();
  if (!last_step_.empty()) viewer->queue_.push_back(last_step_);
  viewers_.push_back(viewer);
  num_viewers_.store(static_cast<int>(viewers_.size()));
  return viewer;
}

void Dashboard::disconnect(const std::shared_ptr<Viewer>& viewer) {
  const std::lock_guard lock(viewers_mutex_);
  std::erase(viewers_, viewer);
  num_viewers_.store(static_cast<int>(viewers_.size()));
}

void Dashboard::close() {
  const std::lock_guard lock(viewers_mutex_);
  closed_ = true;
  for (const auto& v : viewers_) {
    v->closed_.store(true);
    v->ready_.notify_all();
  }
}

void Dashboard::publish(std::string record, bool is_step) {
  // The engine loop's side: it never waits. A lock held elsewhere costs this record, not a stall.
  std::unique_lock lock(viewers_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) {
    dropped_.fetch_add(1);
    return;
  }
  for (const auto& v : viewers_) {
    std::unique_lock q(v->mutex_, std::try_to_lock);
    if (!q.owns_lock()) {
      dropped_.fetch_add(1);
      continue;  // the viewer is taking its batch this instant; it gets the next record
    }
    if (v->queue_.size() >= limits_.queue_records) {
      v->queue_.pop_front();
      ++v->dropped_;
      dropped_.fetch_add(1);
    }
    v->queue_.push_back(record);
    q.unlock();
    v->ready_.notify_one();
  }
  if (is_step) last_step_ = std::move(record);
}

void Dashboard::on_request(const RequestEvent& event) {
  if (!active()) return;
  std::string json;
  append_request_json(json, event);
  publish(std::move(json), false);
}

void Dashboard::on_step(const StepRecord& record) {
  if (!active()) return;
  std::string json;
  json.reserve(256 + 8 * static_cast<std::size_t>(record.num_blocks - record.num_free_blocks));
  append_step_json(json, record, nullptr);
  publish(std::move(json), true);
}

}  // namespace servelab
