// SPDX-License-Identifier: MIT
/**
 * @file prefill_role.h
 * @brief The prefill side of a worker: prompts in as engine requests of one
 *        token, their KV out to the decode worker's blocks.
 * @verbatim
 *  PREFILL{prompt, dst_blocks} ─► Engine::add_request(max_tokens = 1)
 *  step (one or more prompts) ─► first token; the blocks are held (hold_finished_kv)
 *    write: put the KV into dst_blocks, KV_READY, release
 *    send:  KV_SENDING, tagged sends, KV_READY, release
 *    read:  KV_READY{src_blocks}, release at READ_DONE (or kv_timeout)
 *    --layerwise (write): each layer leaves during the step (LayerStreamer)
 * @endverbatim
 */
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "disagg/layer_streamer.h"
#include "disagg/worker_context.h"

namespace servelab::disagg {

/// What the prefill role keeps of a request while its prompt waits, runs, and its KV leaves.
struct PrefillJob {
  std::int64_t req = 0;                       ///< the router's id
  int decode_worker = 0;                      ///< the router's id of the decode worker
  std::vector<std::int32_t> dst{};            ///< the decode worker's blocks for the prompt
  std::unique_ptr<LayerStreamer> streamer{};  ///< --layerwise: made at the step's first layer
  std::size_t streamed_descriptors = 0;       ///< per-layer plans coalesce within a layer only
  std::string stream_error{};                 ///< why streaming could not start, reported after the step
  double held_until = -1;                     ///< READ: blocks held until READ_DONE or this time; -1 = not held
};

/// Prefills prompts for decode workers elsewhere.
class PrefillRole : public RoleJobs<PrefillJob> {
 public:
  /// @p context must outlive the role.
  explicit PrefillRole(WorkerContext& context) : c_(context) {}

  /// PREFILL from the router: queues the prompt; reports a failure to the router when it is refused.
  void prefill(const Message& m);
  /// READ_DONE: the decode side has read request @p req's KV; its blocks go back.
  void read_done(std::int64_t req);
  /// ABORT: drops request @p req wherever it is (queued, or holding KV). False when it is not this role's.
  bool abort(std::int64_t req);
  /**
   * @brief The step that ran [@p step_start, @p step_end] (now_seconds()) sampled request
   *        @p out's first token: its KV leaves now, as the transfer mode says.
   */
  void on_first_token(const RequestOutput& out, double step_start, double step_end);
  /// Model::set_layer_hook's callback under --layerwise: layer @p layer of the step's prompts is final.
  void on_layer(int layer);
  /// Frees READ-mode blocks whose read was never confirmed by @p now (now_seconds()).
  void expire(double now);
  /// True while READ-mode KV waits to be read: the worker then runs no step (see worker.h).
  bool holding() const;

 private:
  // Hands request @p id's blocks back and forgets it.
  void release(int id);
  // Moves the KV of a job whose first token is @p first; returns KV_READY's accounting.
  void transfer(int id, PrefillJob& job, std::int32_t first, double step_start, double step_end);

  WorkerContext& c_;
};

}  // namespace servelab::disagg
