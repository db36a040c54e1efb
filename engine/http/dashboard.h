// SPDX-License-Identifier: MIT
/**
 * @file dashboard.h
 * @brief The live page of `servelab serve`: a step observer that fans the
 *        engine's step records (trace/step_json.h) out to every browser
 *        watching GET /dashboard, over server-sent events.
 * @verbatim
 *  engine-loop thread                            one handler thread per viewer
 *  ──────────────────                            ─────────────────────────────
 *  on_step(record) ─ JSON once ─┬─ try_lock ─► viewer queue (bounded) ─► wait ≤ 50 ms, take all,
 *                               └─ try_lock ─► viewer queue           ─► "data: [rec,...]\n\n"
 * @endverbatim
 * The engine loop never waits for a viewer: it only try_locks, a full queue
 * drops its oldest record (counted and sent to the page), and a record nobody
 * watches is never built (active() is false without viewers). A viewer sends
 * at most one batch per 50 ms, so the page stays responsive at 100 steps/s.
 * The page itself (dashboard.html, compiled into the binary) also opens a
 * saved --trace file and replays it with a step slider, without a server.
 */
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "serve/step_observer.h"

namespace servelab {

/// The page: self-contained HTML and JavaScript (no network fetch but its own event stream).
std::string_view dashboard_html();

/// Step records for live viewers.
class Dashboard final : public StepObserver {
 public:
  /// Limits on what viewers may cost.
  struct Limits {
    int max_viewers = 4;              ///< more get 503 (each holds one of the server's handler threads)
    std::size_t queue_records = 512;  ///< records queued per viewer; a slow one loses its oldest
  };

  /// One browser's stream.
  class Viewer {
   public:
    /**
     * @brief Waits up to @p timeout for records, then takes every queued one.
     * @return the SSE text to send ("data: [...]\n\n", with a "dropped" count when any were lost);
     *         empty when nothing came.
     */
    std::string take(std::chrono::milliseconds timeout);
    /// True once the dashboard closed (the server stops): the stream should end.
    bool closed() const { return closed_.load(); }

   private:
    friend class Dashboard;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::string> queue_;  // records, oldest first
    long dropped_ = 0;               // records lost since the last take()
    std::atomic<bool> closed_{false};
  };

  /// A dashboard with @p limits.
  explicit Dashboard(Limits limits);
  /// A dashboard with the default limits.
  Dashboard() : Dashboard(Limits{}) {}

  /// A new viewer, primed with the latest step record; null when max_viewers are watching or after close().
  std::shared_ptr<Viewer> connect();
  /// Forgets @p viewer (its connection ended); harmless twice.
  void disconnect(const std::shared_ptr<Viewer>& viewer);
  /// Ends every stream and refuses new viewers (before the server stops).
  void close();

  /// Viewers connected now.
  int num_viewers() const { return num_viewers_.load(); }
  /// Records not delivered to some viewer (a full queue, or the loop found a lock taken), so far.
  long num_dropped() const { return dropped_.load(); }

  void on_request(const RequestEvent& event) override;
  void on_step(const StepRecord& record) override;
  bool active() const override { return num_viewers_.load() > 0; }

 private:
  void publish(std::string record, bool is_step);

  Limits limits_;
  std::mutex viewers_mutex_;  // guards viewers_, last_step_, closed_ (the loop only try_locks it)
  std::vector<std::shared_ptr<Viewer>> viewers_;
  std::string last_step_;  // the latest step record, for a viewer that joins
  bool closed_ = false;
  std::atomic<int> num_viewers_{0};
  std::atomic<long> dropped_{0};
};

}  // namespace servelab
