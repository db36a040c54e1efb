// SPDX-License-Identifier: MIT
/**
 * @file engine_loop.h
 * @brief The one thread that owns the Engine (vLLM's EngineCore busy loop)
 *        and the channels that connect it to the HTTP handler threads.
 * @verbatim
 *  handler threads                      engine-loop thread (owns Engine)
 *  ───────────────                      ────────────────────────────────
 *  submit(req) ──► pending queue ──┐    loop:
 *                  (mutex)         └──►   admit pending: Engine::add_request (error → stream)
 *  abort(stream) ─► stream.cancelled ──►  cancelled streams: Engine::abort_request (blocks freed)
 *                                         Engine::step()
 *  stream.next() ◄── RequestStream ◄────  each token → its stream; finished → metrics, release_request
 *   (waits on the stream's condition variable, with a timeout)
 *  SseWriter ◄──────── on_step() ◄──────  once per step: the streamed replies' writer takes every stream's news
 *                                         (told whether a stream got its first token or ended)
 * @endverbatim
 * The Engine is single-threaded; only this thread touches it. Handlers see a
 * request through its RequestStream alone, and the metrics through a snapshot
 * taken under a lock after every step.
 */
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http/prometheus.h"
#include "serve/engine.h"

namespace servelab {

/// A generation request as a handler hands it to the engine loop.
struct EngineRequest {
  std::vector<std::int32_t> prompt;          ///< [prompt_len] token ids
  SamplingParams sampling;                   ///< temperature, top_p, top_k, seed
  int max_tokens = 16;                       ///< most output tokens
  std::vector<std::int32_t> stop_token_ids;  ///< finish after one of these (empty with ignore_eos)
};

/// One request's channel from the engine loop to its handler: tokens as they are sampled, then the end.
class RequestStream {
 public:
  /// What next() returns: the tokens since the previous call, and whether the request ended.
  struct Update {
    std::vector<std::int32_t> tokens;                 ///< new output tokens, in order
    bool admitted = false;                            ///< the engine took the request (false: still queued or refused)
    bool finished = false;                            ///< no more tokens will come
    FinishReason finish_reason = FinishReason::NONE;  ///< why, once finished
    std::string error;                                ///< Engine::add_request's message when the request was refused
  };

  /**
   * @brief Waits until there is something new (a token, admission, the end)
   *        or @p timeout passes, and takes it.
   */
  Update next(std::chrono::milliseconds timeout);
  /// What next() would return, without waiting (the SSE writer's read after each step).
  Update take();
  /// True once the request has finished, been refused or been aborted.
  bool finished() const;

 private:
  friend class EngineLoop;
  Update take_locked();
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::int32_t> tokens_;  // [output tokens so far]
  std::size_t taken_ = 0;             // tokens_ already returned by next()
  bool admitted_ = false, admission_reported_ = false, finished_ = false, cancelled_ = false;
  FinishReason cancel_reason_ = FinishReason::ABORT;  // why it was cancelled (STOP: a stop string matched)
  FinishReason finish_reason_ = FinishReason::NONE;
  std::string error_;
  int request_id_ = -1;  // the engine's id once admitted (engine-loop thread only)
};

/// Engine gauges and block counts at one moment, for tests and `/metrics`.
struct EngineLoopStats {
  int num_requests = 0;     ///< requests the engine holds (running, waiting, or finished and not yet released)
  int num_blocks = 0;       ///< KV blocks in the cache
  int num_free_blocks = 0;  ///< KV blocks in the free queue
  int num_pending = 0;      ///< submitted requests the loop has not taken yet
};

/// Runs an Engine on its own thread and serves every handler through continuous batching.
class EngineLoop {
 public:
  /// The default of `servelab serve --batch-wait-us`.
  static constexpr std::chrono::microseconds kDefaultBatchWait{500};

  /**
   * @brief Starts the loop thread over @p engine, which must outlive this object and is touched only by that thread.
   * @param batch_wait when a request finds the engine idle, the loop waits for more before its first step: until
   *        no other arrives for this long, the arrivals fill max_num_seqs, or 10 × this has passed. 0 steps at once.
   *        A running batch never waits.
   * @throws Error naming --batch-wait-us when @p batch_wait is outside [0, 1 s].
   */
  explicit EngineLoop(Engine& engine, std::chrono::microseconds batch_wait = kDefaultBatchWait);
  /// Aborts what is left and joins the thread (shutdown()).
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  /**
   * @brief Queues a request; the loop admits it before its next step.
   * @return the stream its tokens arrive on; a refused request ends with Update::error set.
   *         After shutdown() the stream is already finished with an error.
   */
  std::shared_ptr<RequestStream> submit(EngineRequest request);
  /**
   * @brief Aborts @p stream's request (its KV blocks are freed before the next step); harmless once finished.
   * @param reason what the metrics count it as: ABORT for a client that left, STOP for a stop string.
   */
  void abort(RequestStream& stream, FinishReason reason = FinishReason::ABORT);
  /// Aborts every request, queued or running, and refuses new ones; then joins the loop thread. Idempotent.
  void shutdown();
  /// The Prometheus text of the server's metrics (serve/prometheus.h).
  std::string metrics_text() const;
  /// Block and request counts after the most recent step.
  EngineLoopStats stats() const;
  /**
   * @brief Calls @p listener on the loop thread after every step (and after the shutdown's
   *        aborts), once that step's tokens are in their streams; empty removes it.
   *        Its argument is true when some stream got its first token or ended in that step (what a
   *        reader that batches the others must not hold back).
   *        It runs under the loop's lock: it must be quick and must not call back into this loop.
   */
  void on_step(std::function<void(bool)> listener);

 private:
  void run();
  void gather_burst(std::unique_lock<std::mutex>& lock);  // the wait batch_wait_ describes, under mutex_
  void admit_pending();
  void abort_cancelled();
  void deliver(const std::vector<RequestOutput>& outputs);
  // Finishes ended_'s streams, after update_gauges(): a client whose reply has ended finds its request gone from /metrics.
  void end_streams();
  void finish_stream(RequestStream& stream, FinishReason reason);
  void record_finished(const Request& request, FinishReason reason);
  void update_gauges();
  void announce_step();  // calls on_step_ with news_, and clears it

  Engine& engine_;
  const std::chrono::microseconds batch_wait_;
  mutable std::mutex mutex_;      // guards pending_, stopping_, metrics_, stats_
  std::condition_variable work_;  // signalled by submit(), abort(), shutdown()
  struct Pending {
    EngineRequest request;
    std::shared_ptr<RequestStream> stream;
    double submitted;  // now_seconds() at submit(): the request's arrival, as vLLM's API server stamps it
  };
  std::vector<Pending> pending_;  // submitted, not yet admitted
  // Loop thread only: the requests released this iteration, whose streams end_streams() finishes.
  std::vector<std::pair<std::shared_ptr<RequestStream>, FinishReason>> ended_;
  bool news_ = false;  // loop thread only: a stream got its first token or ended since the last announce_step()
  bool stopping_ = false;
  bool wake_ = false;  // an abort or submit happened since the loop last looked
  std::function<void(bool)> on_step_;  // on_step()'s listener
  ServerMetrics metrics_;
  EngineLoopStats stats_;
  std::vector<std::shared_ptr<RequestStream>> active_;  // admitted and unfinished (loop thread only)
  std::thread thread_;
};

}  // namespace servelab
