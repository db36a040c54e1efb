// SPDX-License-Identifier: MIT
/**
 * @file decode_role.h
 * @brief The decode side of a worker: a request waits in the engine for its
 *        prompt's KV, then decodes as any engine request does.
 * @verbatim
 *  ALLOC{prompt, max_tokens} ─► Engine::add_remote_request: the prompt's blocks now
 *     ALLOCATED{blocks}, or FULL (too few free blocks now: the router retries), or FAILED (never fits)
 *  KV_SENDING ─► post the tagged receives (send mode)
 *  KV_READY{first_token} ─► read mode: get the KV; checksum; Engine::kv_arrived
 *  every step ─► TOKEN per new token, FINISHED with the accounting
 * @endverbatim
 * Once its KV is in, a request takes more blocks as it grows and, when the
 * pool runs dry, the engine preempts the newest running request: its blocks
 * are freed and it recomputes prompt and output here later (the accounting's
 * num_preemptions says how often), as on a colocated engine.
 */
#pragma once

#include <cstdint>
#include <map>

#include "disagg/worker_context.h"

namespace servelab::disagg {

/// What the decode role keeps of a request from ALLOC to its last token.
struct DecodeJob {
  std::int64_t req = 0;                    ///< the router's id
  double deadline = 0;                     ///< fail it if the KV has not arrived by then (now_seconds())
  bool local = false;                      ///< role both: the prompt is computed here
  double read_seconds = 0;                 ///< READ mode: how long the get took
  Message accounting = Message::object();  ///< the transfer's accounting, reported with FINISHED
};

/// Decodes requests whose prompts other workers (or this one, role both) prefill.
class DecodeRole : public RoleJobs<DecodeJob> {
 public:
  /// @p context must outlive the role.
  explicit DecodeRole(WorkerContext& context) : c_(context) {}

  /// ALLOC from the router: queues the request waiting for its KV and answers with its prompt's blocks.
  void alloc(const Message& m);
  /// PREFILL addressed to this worker as the decode side (role both): the prompt is computed here.
  void prefill_locally(const Message& m);
  /// KV_SENDING (@p ready false) or KV_READY relayed from the prefill worker.
  void kv(const Message& m, bool ready);
  /// ABORT: drops request @p req and frees its blocks. False when it is not this role's.
  bool abort(std::int64_t req);
  /// A step that ran [@p step_start, @p step_end] (now_seconds()) emitted @p out for one of this role's requests.
  void on_token(const RequestOutput& out, double step_start, double step_end);
  /// Fails the requests whose KV has not arrived by @p now (now_seconds()) and frees their blocks.
  void expire(double now);
  /// True while a request waits for KV: the worker then progresses the transport often.
  bool waiting_for_kv() const;

 private:
  // Reports request @p id finished, frees its blocks and forgets it.
  void finish(int id);
  // Frees request @p id's blocks and forgets it.
  void drop(int id);
  // The KV of request @p id from another worker (SEND: post the receives; READ: get it).
  void receive(const Message& m, bool ready, int id, DecodeJob& job);

  WorkerContext& c_;
};

}  // namespace servelab::disagg
