// SPDX-License-Identifier: MIT
/**
 * @file step_observer.h
 * @brief What the engine tells an observer after every step: which requests
 *        ran and how many tokens of which kind, where the step's time went,
 *        the queues, the KV block pool, preemptions and the requests whose
 *        phase changed. The Chrome trace writer (trace/chrome_trace.h) and the
 *        live dashboard (http/dashboard.h) are two observers of the same record.
 * @verbatim
 *  Engine::add_request ──► on_request(ADDED)
 *  Engine::step()      ──► on_step(StepRecord)      one per step, empty steps included
 *  Engine::abort_request ► on_request(ABORTED)
 * @endverbatim
 * The engine builds a record only while an observer is attached, so an engine
 * without one does no extra work; an observer never changes what the engine
 * schedules or samples (tests/engine/serve/step_trace_test.cpp checks the tokens).
 * Observers are called on the engine's thread and must return quickly: one
 * that hands records to another thread copies what it keeps.
 */
#pragma once

#include <cstdint>
#include <vector>

#include "sched/request.h"

namespace servelab {

/// One request's share of a step.
struct StepShare {
  int request_id = 0;           ///< whose tokens
  int num_new_tokens = 0;       ///< tokens computed for it in this step
  int num_computed_before = 0;  ///< its num_computed_tokens when the step began (0 for a recompute after preemption)
  bool decode = false;          ///< a decode (its newest output token); else prompt or recomputed tokens
  bool sampled = false;         ///< the step sampled a token for it
};

/// A request preempted while the step was scheduled (vLLM's preemption by recompute).
struct Preemption {
  int request_id = 0;        ///< the victim
  int tokens_discarded = 0;  ///< computed tokens whose KV was thrown away (to be recomputed)
};

/// The KV blocks one request holds after the step, in logical order.
struct BlockOwner {
  int request_id = 0;                   ///< the holder
  std::vector<std::int32_t> block_ids;  ///< its block table's physical block ids
};

/// Everything one step did, in engine-clock seconds.
struct StepRecord {
  long step = 0;                ///< 0 for the engine's first step
  bool simulated = false;       ///< the engine clock is a cost model's prediction, not the wall's
  double start = 0;             ///< engine clock when the step began, seconds
  double end = 0;               ///< engine clock when it ended, seconds (start + the forward pass on a simulated clock)
  double schedule_seconds = 0;  ///< wall seconds in Scheduler::schedule()
  double forward_seconds = 0;   ///< Model::forward (wall), or the cost model's prediction (simulated)
  double sample_seconds = 0;    ///< wall seconds sampling; 0 when the model picked greedy tokens inside forward
  double update_seconds = 0;    ///< wall seconds in update_from_output()
  int num_prefill_tokens = 0;   ///< prompt (or recomputed) tokens in the batch
  int num_decode_tokens = 0;    ///< decode tokens in the batch
  std::vector<StepShare> scheduled;          ///< in batch order; empty when nothing ran
  std::vector<Preemption> preempted;         ///< preempted while scheduling this step
  std::vector<int> first_token;              ///< requests whose first output token this step sampled
  std::vector<int> finished;                 ///< requests that finished in this step
  std::vector<FinishReason> finish_reasons;  ///< [finished.size()] why each finished
  std::vector<int> running;                  ///< running after the step, oldest first
  std::vector<int> waiting;                  ///< waiting after the step, front first
  int num_blocks = 0;                        ///< KV blocks in the pool
  int num_free_blocks = 0;                   ///< free after the step (the pool's own count)
  int num_used_blocks_forward = 0;           ///< held during the forward pass (after scheduling)
  std::vector<BlockOwner> blocks;            ///< every request holding blocks after the step, by request id

  /// Blocks in use after the step: num_blocks - num_free_blocks.
  int num_used_blocks() const { return num_blocks - num_free_blocks; }
};

/// A request's arrival or abort, outside a step.
struct RequestEvent {
  /// A request joined the engine (ADDED) or was ended by its client (ABORTED).
  enum class Kind { ADDED, ABORTED };
  Kind kind = Kind::ADDED;    ///< what happened
  int request_id = 0;         ///< to whom
  double time = 0;            ///< engine clock, seconds: the arrival time for ADDED, the abort for ABORTED
  int num_prompt_tokens = 0;  ///< its prompt's length
  int max_tokens = 0;         ///< its output limit
};

/// Receives the engine's step records; attach with Engine::add_observer().
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  /// A request was queued or aborted (between steps).
  virtual void on_request(const RequestEvent& event) = 0;
  /// A step ran; @p record lives only for the call.
  virtual void on_step(const StepRecord& record) = 0;
  /// False while the observer wants nothing (a dashboard nobody watches): the engine then builds no record.
  virtual bool active() const { return true; }
};

}  // namespace servelab
