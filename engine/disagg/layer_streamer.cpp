// SPDX-License-Identifier: MIT
#include "disagg/layer_streamer.h"

#include <algorithm>

#include "core/error.h"
#include "core/timer.h"

namespace servelab::disagg {

LayerStreamer::LayerStreamer(Transport& transport, int peer, std::vector<std::vector<TransferDescriptor>> layers,
                             TransferOptions options)
    : transport_(transport), peer_(peer), layers_(std::move(layers)), options_(options), thread_([this] { run(); }) {}

LayerStreamer::~LayerStreamer() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  ready_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LayerStreamer::layer_done(int layer) {
  {
    std::lock_guard lock(mutex_);
    check(layer == num_ready_ && layer < static_cast<int>(layers_.size()), "layer streamer: layer ", layer,
          " marked done out of order (expected ", num_ready_, ")");
    ++num_ready_;
  }
  ready_.notify_all();
}

void LayerStreamer::run() {
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return stop_ || num_ready_ > static_cast<int>(l); });
      if (num_ready_ <= static_cast<int>(l)) return;  // stopped before this layer was done
    }
    const double start = now_seconds();
    try {
      transport_.write(peer_, layers_[l], options_);
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      return;
    }
    std::lock_guard lock(mutex_);
    spans_.emplace_back(start, now_seconds());
  }
}

StreamStats LayerStreamer::finish(double compute_start, double compute_end) {
  {
    std::lock_guard lock(mutex_);
    check(num_ready_ == static_cast<int>(layers_.size()), "layer streamer: only ", num_ready_, " of ", layers_.size(),
          " layers were marked done");
  }
  thread_.join();  // bounded: each write has its own timeout
  if (error_) std::rethrow_exception(error_);
  StreamStats stats;
  for (const auto& [start, end] : spans_) {
    stats.busy_seconds += end - start;
    stats.overlapped_seconds += std::max(0.0, std::min(end, compute_end) - std::max(start, compute_start));
    stats.end = std::max(stats.end, end);
  }
  return stats;
}

}  // namespace servelab::disagg
