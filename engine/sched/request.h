// SPDX-License-Identifier: MIT
/**
 * @file request.h
 * @brief A generation request as the scheduler sees it (vLLM v1: Request,
 *        RequestStatus): its tokens, how many of them are in the KV cache,
 *        its state and the moments that TTFT, TPOT and ITL are computed from.
 *
 * There is no "prefill phase" or "decode phase": a request has
 * num_tokens() tokens (prompt + output so far) of which num_computed_tokens
 * have K/V in the cache; a step computes some of the rest. A fresh request
 * computes its whole prompt, a running one its newest token, a preempted
 * one everything again.
 * @verbatim
 *  WAITING ──schedule()──► RUNNING ──stop token / max_tokens──► FINISHED
 *     ▲                      │  └────────abort────────────────► FINISHED
 *     └──── PREEMPTED ◄──────┘ out of KV blocks: blocks freed, num_computed_tokens = 0
 *
 *  WAITING_FOR_REMOTE_KV ──kv_arrived──► WAITING   (disaggregated serving: the prompt's KV
 *                                                   is computed by another worker)
 * @endverbatim
 */
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/sampler.h"

namespace servelab {

/// Where a request is in its life.
/// WAITING_FOR_REMOTE_KV (vLLM's WAITING_FOR_REMOTE_KVS): queued with its prompt's blocks taken,
/// while another process computes the prompt's KV into them; the scheduler passes it over until then.
enum class RequestStatus { WAITING, WAITING_FOR_REMOTE_KV, RUNNING, PREEMPTED, FINISHED };

/// Why a request finished.
enum class FinishReason { NONE, STOP, LENGTH, ABORT };

/// Lower-case name ("waiting", ...).
const char* to_string(RequestStatus status);
/// vLLM's and OpenAI's name: "stop", "length", "abort"; "" for NONE.
const char* to_string(FinishReason reason);

/// Moments in a request's life, in seconds on the engine's clock.
struct RequestTimes {
  double arrival = 0;               ///< when add_request() took it
  double first_scheduled = -1;      ///< start of the first step that computed any of it; -1 until then
  std::vector<double> token_times;  ///< [num_output_tokens] when each output token was sampled
  double finished = -1;             ///< when it finished; -1 until then
};

/// One request: prompt, sampling settings, progress and timestamps.
class Request {
 public:
  /**
   * @param request_id unique id given by the engine.
   * @param prompt     prompt token ids (not empty; checked by the engine).
   * @param sampling   sampling settings; the request's own seeded Sampler is built from them.
   * @param max_tokens most output tokens.
   * @param stop_token_ids the request finishes after emitting one of these.
   * @param arrival    arrival time, engine clock seconds.
   */
  Request(int request_id, std::span<const std::int32_t> prompt, const SamplingParams& sampling, int max_tokens,
          std::vector<std::int32_t> stop_token_ids, double arrival);

  int request_id;                                   ///< engine-unique id
  int max_tokens;                                   ///< most output tokens
  std::vector<std::int32_t> stop_token_ids;         ///< finishing tokens
  Sampler sampler;                                  ///< this request's sampling stream
  int num_computed_tokens = 0;                      ///< leading tokens whose K/V are in the cache
  RequestStatus status = RequestStatus::WAITING;    ///< where the scheduler holds it
  FinishReason finish_reason = FinishReason::NONE;  ///< why it finished; NONE while it runs
  int num_preemptions = 0;                          ///< times its KV was thrown away
  RequestTimes times;                               ///< timestamps

  /// Prompt tokens.
  int num_prompt_tokens() const { return num_prompt_tokens_; }
  /// Output tokens so far.
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }
  /// Prompt + output tokens so far.
  int num_tokens() const { return static_cast<int>(all_token_ids_.size()); }
  /// Tokens with no K/V in the cache yet: what the next step computes when it schedules the request whole.
  int num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  /// Prompt then output tokens.
  std::span<const std::int32_t> all_token_ids() const { return all_token_ids_; }
  /// Output tokens.
  std::span<const std::int32_t> output_token_ids() const {
    return std::span(all_token_ids_).subspan(static_cast<std::size_t>(num_prompt_tokens_));
  }
  /// The longest this request can get: prompt + max_tokens.
  int max_num_tokens() const { return num_prompt_tokens_ + max_tokens; }
  /// True once FINISHED.
  bool is_finished() const { return status == RequestStatus::FINISHED; }

  /// Appends a sampled token at @p now and finishes the request if it is a stop token or the last allowed.
  void append_output_token(std::int32_t token, double now);
  /// Marks the request FINISHED for @p reason at @p now.
  void finish(FinishReason reason, double now);

 private:
  int num_prompt_tokens_;
  std::vector<std::int32_t> all_token_ids_;  // [num_tokens] prompt, then output
};

}  // namespace servelab
