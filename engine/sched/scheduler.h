// SPDX-License-Identifier: MIT
/**
 * @file scheduler.h
 * @brief Decides, at every step, which requests run and how many of their
 *        tokens (vLLM v1: Scheduler::schedule() → SchedulerOutput →
 *        update_from_output()).
 *
 * One loop, three policies; they differ only in when a waiting request may
 * join the running set:
 * | policy | a waiting request joins | the article's name |
 * |---|---|---|
 * | one_at_a_time | when nothing runs; one request per batch | no batching |
 * | static | when the whole previous batch has finished | static batching |
 * | continuous | at any step, while max_num_seqs, the token budget and the KV blocks allow | continuous batching |
 *
 * Every step, running requests are scheduled first (oldest first), then
 * waiting ones in arrival order (FCFS). Without chunked prefill a request is
 * scheduled whole: all of its uncomputed tokens at once (its prompt, or its
 * newest token), so a prompt must fit max_num_batched_tokens. With chunked
 * prefill (lab 06) a request gets min(uncomputed, budget left,
 * long_prefill_token_threshold) tokens: the running requests' decodes come
 * first, and prompts fill what is left of the budget, a chunk per step,
 * meeting again in the KV cache:
 * @verbatim
 *  budget 512, threshold 256, a 1,000-token prompt beside 4 decodes:
 *  step 1: 4 decodes + 256 prompt tokens   step 3: 4 + 256
 *  step 2: 4 decodes + 256                 step 4: 4 + 232, then its first token is sampled
 * @endverbatim
 * When the KV blocks run out, the newest running request
 * is preempted: its blocks are freed, its progress is thrown away, and it
 * goes back to the front of the waiting queue to be recomputed later
 * (vLLM's preemption by recompute).
 *
 * A request whose prompt's KV is being computed by another worker
 * (WAITING_FOR_REMOTE_KV) waits in the queue holding its prompt's blocks;
 * the requests behind it may go first, and it joins as soon as its KV has
 * arrived (lab 07's decode worker).
 */
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "sched/kv_cache_manager.h"
#include "sched/request.h"

namespace servelab {

/// When waiting requests may join the running set.
enum class SchedulingPolicy { ONE_AT_A_TIME, STATIC, CONTINUOUS };

/// "one_at_a_time", "static" or "continuous".
const char* to_string(SchedulingPolicy policy);
/// Parses to_string()'s names; @throws Error naming @p what and the accepted names otherwise.
SchedulingPolicy parse_scheduling_policy(const std::string& text, const std::string& what);

/// The scheduler's limits (vLLM's names).
struct SchedulerConfig {
  SchedulingPolicy policy = SchedulingPolicy::CONTINUOUS;  ///< when waiting requests join
  int max_num_seqs = 16;  ///< most requests in one step (the batch size); 1 for one_at_a_time
  int max_num_batched_tokens =
      2048;  ///< most tokens in one step (the token budget); without chunking a whole prompt must fit
  /// --enable-chunked-prefill (lab 06): a prompt may be split over steps, so no step exceeds the budget.
  bool enable_chunked_prefill = false;
  /// --long-prefill-token-threshold: with chunking, most tokens of one request in one step; 0 = only the budget limits.
  int long_prefill_token_threshold = 0;
  /// A finished request keeps its KV blocks until KVCacheManager::free() is called for it (vLLM's
  /// delayed free): a prefill worker sends or lets the decode side read them after the step.
  bool hold_finished_kv = false;
};

/// One request's share of a step.
struct ScheduledRequest {
  Request* request = nullptr;  ///< the request (owned by the engine)
  int num_new_tokens = 0;      ///< tokens computed for it in this step, after its num_computed_tokens
};

/// What one step runs.
struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;  ///< in batch order: running requests, then newly admitted ones
  std::vector<int> preempted_request_ids;   ///< requests preempted while making room in this step
  int total_num_scheduled_tokens = 0;       ///< sum of num_new_tokens
  /// True when nothing runs in this step.
  bool empty() const { return scheduled.empty(); }
};

/// The scheduling policy over the waiting and running queues.
class Scheduler {
 public:
  /**
   * @param kv_cache_manager gives and takes KV blocks; must outlive the scheduler.
   * @param log receives one line per preemption; may be empty.
   * @throws Error naming --max-num-seqs or --max-num-batched-tokens when not positive.
   */
  Scheduler(const SchedulerConfig& config, KVCacheManager& kv_cache_manager,
            std::function<void(const std::string&)> log = {});

  /// Queues @p request (WAITING, or WAITING_FOR_REMOTE_KV when so marked) behind every request already waiting.
  void add_request(Request* request);
  /**
   * @brief Finishes @p request with FinishReason::ABORT at @p now, wherever it is, and frees its blocks.
   * @return false when it had already finished.
   */
  bool abort_request(Request* request, double now);
  /**
   * @brief Takes @p request, which finished outside a step (its remote first token was its
   *        last), out of the queues and frees its blocks unless hold_finished_kv.
   * @throws Error when it has not finished.
   */
  void remove_finished(Request* request);

  /**
   * @brief Chooses the requests and token counts of the next step; allocates their KV blocks.
   *
   * Running requests first (oldest first), then waiting ones (FCFS, passing over those
   * still waiting for remote KV) while
   * the policy, max_num_seqs and the blocks allow. Each request's share
   * comes out of the budget (max_num_batched_tokens) left after those
   * before it:
   * - with chunked prefill, min(its uncomputed tokens, the budget left,
   *   long_prefill_token_threshold when that is > 0): the budget left is
   *   max_num_batched_tokens less the shares of the requests scheduled
   *   before it in this step (the running requests' decodes come first), so
   *   no step exceeds the budget and no request gets more than the
   *   threshold; a threshold of 0 limits nothing. A share of 0 (budget
   *   spent) means it waits for a later step (lab 06);
   * - without, all of its uncomputed tokens when they fit the budget left,
   *   else none; a request larger than the whole budget runs alone.
   * @return the plan; empty when nothing can run (no request, or no block for any).
   */
  SchedulerOutput schedule();

  /**
   * @brief Records a step's results: advances num_computed_tokens, appends
   *        each sampled token, finishes requests and frees their blocks
   *        (unless hold_finished_kv).
   *
   * A request whose share was a chunk that leaves tokens uncomputed (chunked
   * prefill, lab 06) advances num_computed_tokens by the chunk, so its next
   * chunk starts where this one ended and its KV is kept; it takes no token
   * of @p sampled (the chunk's last row is not the sequence's last, so its
   * logits predict nothing) and stays running, whatever @p keep_kv says.
   * A request that catches up with its tokens samples one.
   * @param sampled one token per scheduled request that finished computing
   *        its tokens in this step (all of them, while requests are scheduled
   *        whole), in output.scheduled order.
   * @param now when the tokens were sampled (engine clock).
   * @param keep_kv false discards every request's KV after the step, so the
   *        next step recomputes the whole sequence (lab 01, use_cache=False).
   * @return the requests that finished in this step.
   */
  std::vector<Request*> update_from_output(const SchedulerOutput& output, const std::vector<std::int32_t>& sampled,
                                           double now, bool keep_kv = true);

  /// Requests waiting (fresh or preempted), front first.
  const std::deque<Request*>& waiting() const { return waiting_; }
  /// Running requests, oldest first.
  const std::vector<Request*>& running() const { return running_; }
  /// True while a request waits or runs.
  bool has_unfinished_requests() const { return !waiting_.empty() || !running_.empty(); }
  /// Requests preempted so far.
  int num_preemptions() const { return num_preemptions_; }
  /// The limits.
  const SchedulerConfig& config() const { return config_; }

 private:
  bool may_admit() const;
  /**
   * Preemption by recompute: takes @p victim out of the running set, logs one line (its id, the blocks
   * freed, the computed tokens thrown away), frees its blocks, marks it PREEMPTED with
   * num_computed_tokens = 0, counts it (its num_preemptions and the scheduler's), and puts it at the
   * front of the waiting queue: it arrived before anyone still waiting.
   */
  void preempt(Request* victim);

  SchedulerConfig config_;
  KVCacheManager& kv_;
  std::function<void(const std::string&)> log_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;
  int num_preemptions_ = 0;
};

}  // namespace servelab
