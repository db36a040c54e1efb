// SPDX-License-Identifier: MIT
/**
 * @file engine.h
 * @brief The serving engine loop (vLLM v1's EngineCore): requests in,
 *        one step at a time, tokens out.
 * @verbatim
 *  add_request ──► waiting ─┐
 *                           ▼
 *  step():  Scheduler::schedule()      which requests, how many tokens each, their KV blocks
 *           Model::forward(Batch)      one ragged batch: prompts and newest tokens together
 *           Sampler per request        a token for each request that caught up
 *           update_from_output()       append tokens, finish, free blocks
 * @endverbatim
 * Single-threaded: call add_request(), abort_request() and step() from one
 * thread. Every request's KV lives in one KVCache of num_blocks blocks of
 * block_size tokens, sized from a memory budget; the contiguous cache of
 * labs 01-03 is the same engine with one block per request.
 *
 * Two clocks. Built on a Model, a step runs the model and the engine's clock
 * is the wall clock. Built on a SimulatedModel, a step runs no model: the
 * cost model predicts how long the step's FLOPs and bytes would take on some
 * hardware, the engine's clock advances by that much, and every request
 * gets a dummy token. The scheduler, the KV blocks and the metrics are the
 * same code either way, so a laptop can replay serving at GPU scale (labs
 * 06 and 07); such numbers are simulated, and the labs say so.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "perf/cost_model.h"
#include "sched/kv_cache_manager.h"
#include "sched/scheduler.h"
#include "serve/step_observer.h"

namespace servelab {

/// How the engine is set up (vLLM's flag names in the comments).
struct EngineConfig {
  SchedulerConfig scheduler;  ///< policy, --max-num-seqs, --max-num-batched-tokens
  int block_size = 16;        ///< --block-size: tokens per KV block
  /// --kv-cache-memory: bytes of KV blocks; 0 = room for max_num_seqs sequences of max_model_len.
  std::size_t kv_cache_memory = 0;
  /// --gpu-memory-utilization: on CUDA, the share of device memory the engine may fill (weights + KV); 0 = use kv_cache_memory.
  double gpu_memory_utilization = 0;
  /// --num-gpu-blocks-override: exactly this many KV blocks, whatever kv_cache_memory says (a worker's
  /// --num-blocks); 0 = sized from the memory budget.
  int num_gpu_blocks_override = 0;
  int max_model_len = 0;        ///< --max-model-len: longest prompt + output; 0 = the model's max_position_embeddings
  bool enable_kv_cache = true;  ///< false recomputes every sequence in full at every step (lab 01)
  /// --enable-prefix-caching: requests share the KV blocks of a common prefix (kv/block_pool.h); off in the labs.
  bool enable_prefix_caching = false;
  std::function<void(const std::string&)> log;  ///< preemption lines; empty = stderr
};

/// What a simulated engine runs instead of a model.
struct SimulatedModel {
  ModelConfig config;  ///< the model's shape (weights are never made)
  CostModel cost;      ///< predicts each step's seconds from its FLOPs and bytes
  StepDtypes dtypes;   ///< bytes per element of weights, activations and KV (the KV budget uses dtypes.kv)
};

/// What one step did, for timelines and meters.
struct StepStats {
  int num_scheduled_requests = 0;  ///< requests in the batch
  int num_scheduled_tokens = 0;    ///< token rows in the batch
  int num_decode_tokens = 0;       ///< of which newest tokens of requests that have output (decodes)
  int num_prefill_tokens = 0;      ///< of which prompt (or recomputed) tokens
  int num_sampled = 0;             ///< tokens emitted
  int num_running = 0;             ///< running after the step
  int num_waiting = 0;             ///< waiting after the step
  int num_preempted = 0;           ///< preempted while scheduling this step
  int num_used_blocks = 0;         ///< KV blocks held after scheduling (during the forward pass)
  double start = 0;                ///< engine clock at the step's start, seconds
  Work work;                       ///< the step's FLOPs and bytes, from the closed form (perf/work.h)
  double schedule_seconds = 0;     ///< time in schedule() and update_from_output()
  double forward_seconds = 0;      ///< Model::forward and sampling
  double sample_seconds = 0;       ///< of forward_seconds, sampling outside the model (0 when it picked greedy tokens)
  double update_seconds = 0;       ///< update_from_output() (wall; part of schedule_seconds on a real engine)
};

/// One request's new token from a step.
struct RequestOutput {
  int request_id = 0;                               ///< whose token
  std::int32_t token = 0;                           ///< the token
  FinishReason finish_reason = FinishReason::NONE;  ///< NONE while it runs on
};

/// Requests in, tokens out: the scheduler, the KV blocks and the model together.
class Engine {
 public:
  /**
   * @brief Sizes the KV cache from the budget and makes it in the model's backend memory.
   * @throws Error naming the flag when a size is not positive, the budget
   *         holds no block, or max_model_len exceeds the model's.
   */
  Engine(Model& model, EngineConfig config);
  /**
   * @brief A simulated engine: the same scheduler and KV blocks on a clock
   *        advanced by @p model's cost model (no model runs, no KV is allocated).
   * @throws Error as the real constructor; kv_cache_memory (or its default) sizes the blocks.
   */
  Engine(const SimulatedModel& model, EngineConfig config);

  /**
   * @brief Queues a request; it runs in a later step().
   * @param arrival engine-clock arrival time; negative = now().
   * @return its request id.
   * @throws Error (and queues nothing) when the prompt is empty, a token is
   *         outside the vocabulary, max_tokens < 1, prompt + max_tokens
   *         exceeds max_model_len, the prompt exceeds max_num_batched_tokens,
   *         or the request could not fit in the whole KV cache.
   */
  int add_request(std::span<const std::int32_t> prompt, const SamplingParams& sampling, int max_tokens,
                  std::vector<std::int32_t> stop_token_ids = {}, double arrival = -1);
  /**
   * @brief Queues a request whose prompt's KV another worker computes (the decode side of
   *        disaggregated serving, vLLM's WAITING_FOR_REMOTE_KVS): the prompt's blocks are
   *        taken now, so their ids can be sent to the prefill side, and the request waits,
   *        passed over by the scheduler, until kv_arrived(). It then grows, is preempted
   *        and finishes as any other request; a preempted one recomputes its prompt here.
   * @return its request id; nothing (and nothing queued) when the cache has too few free
   *         blocks for the prompt now (the caller may try again later).
   * @throws Error as add_request(); and on a simulated engine, which has no KV to receive.
   */
  std::optional<int> add_remote_request(std::span<const std::int32_t> prompt, const SamplingParams& sampling,
                                        int max_tokens, std::vector<std::int32_t> stop_token_ids = {},
                                        double arrival = -1);
  /**
   * @brief The KV of remote request @p request_id is in its blocks: its prompt counts as
   *        computed and @p first_token, sampled on the prefill side at @p first_token_time,
   *        is its first output token (the request's sampler skips that draw), so its next
   *        step is a decode. The request finishes here when that token was its last.
   *
   * In the request's terms: status WAITING (the scheduler admits it like any other),
   * num_computed_tokens = its prompt's length (the KV of every prompt token exists; the
   * first output token's KV does not yet, so the next step feeds exactly that one token),
   * sampler.skip(1), append_output_token(first_token, first_token_time) (its TTFT is the
   * prefill side's), and, when that finishes it (max_tokens 1 or a stop token), the
   * scheduler's remove_finished(), which frees its blocks.
   * @throws Error when the request is unknown or not waiting for remote KV, or
   *         @p first_token is outside the vocabulary.
   */
  void kv_arrived(int request_id, std::int32_t first_token, double first_token_time);
  /**
   * @brief Remote request @p request_id computes its prompt here after all, into the blocks
   *        it already holds (a worker of both roles that prefills its own request).
   * @throws Error when the request is unknown or not waiting for remote KV.
   */
  void compute_prompt_locally(int request_id);
  /**
   * @brief Queues a request whose prompt was prefilled elsewhere and whose KV
   *        has arrived (a simulated decode instance): add_remote_request()
   *        then kv_arrived(), except that a simulated engine takes no blocks
   *        at arrival; blocks for prompt + 1 tokens are taken when it is admitted.
   * @param arrival when the request reached the whole system (engine clock), for TTFT.
   * @return its request id.
   * @throws Error on a real engine (it must receive the KV: add_remote_request()); as
   *         add_request(); and when @p max_tokens < 2 (one token is all the prefill side
   *         makes: such a request never reaches decode) or @p first_token is outside the vocabulary.
   */
  int add_prefilled_request(std::span<const std::int32_t> prompt, const SamplingParams& sampling, int max_tokens,
                            std::int32_t first_token, double arrival, double first_token_time);
  /// Aborts request @p request_id (frees its blocks); false when unknown or already finished.
  bool abort_request(int request_id);
  /**
   * @brief Runs one step: schedule, forward, sample, update.
   * @return the tokens emitted, one per request that got one; empty when nothing could run.
   */
  std::vector<RequestOutput> step();
  /// True while any request waits or runs.
  bool has_unfinished_requests() const { return scheduler_->has_unfinished_requests(); }

  /// Request @p request_id, finished or not. @throws Error when unknown.
  const Request& request(int request_id) const;
  /// Every request the engine has taken, in id order.
  std::vector<const Request*> requests() const;
  /**
   * @brief Forgets finished request @p request_id (a long-running server calls this after
   *        reporting it) and frees the KV blocks it still holds under hold_finished_kv
   *        (a prefill worker, once the KV has been sent or read).
   * @throws Error when the request is unknown or still running.
   */
  void release_request(int request_id);
  /// Seconds on the engine clock (0 at construction): wall time, or simulated time.
  double now() const;
  /**
   * @brief A simulated engine with nothing to run skips ahead to @p seconds
   *        (the next arrival); earlier times are ignored.
   * @throws Error on a real engine, whose clock is the wall's.
   */
  void advance_clock_to(double seconds);
  /// True when built on a SimulatedModel.
  bool simulated() const { return sim_.has_value(); }

  /// Stats of the most recent step.
  const StepStats& last_step() const { return last_; }
  /// The scheduler (queues, preemption count).
  const Scheduler& scheduler() const { return *scheduler_; }
  /// Block bookkeeping.
  const KVCacheManager& kv_cache_manager() const { return *kv_manager_; }
  /// The KV storage (export/import, bytes). @throws Error for a simulated engine, which has none.
  KVCache& kv_cache();
  /// The settings, with the derived max_model_len and KV memory filled in.
  const EngineConfig& config() const { return config_; }
  /// KV blocks in the cache.
  int num_blocks() const { return num_blocks_; }
  /**
   * @brief Tells @p observer about every later request and step (serve/step_observer.h) until
   *        remove_observer(); the engine borrows it. The engine builds step records only
   *        while one is attached.
   */
  void add_observer(StepObserver* observer);
  /// Stops telling @p observer; harmless when it was not attached.
  void remove_observer(StepObserver* observer);

 private:
  /// Sizes the blocks and makes the scheduler (both constructors).
  void init(const ModelConfig& config, std::size_t kv_bytes_per_token);
  /// The checks add_request() and add_prefilled_request() share; throws before anything is queued.
  void check_request(std::span<const std::int32_t> prompt, const SamplingParams& sampling, int max_tokens) const;
  /// Gives @p request an id, hands it to the scheduler and keeps it.
  int queue(std::unique_ptr<Request> request);
  /// A checked request that waits for remote KV, not yet queued.
  std::unique_ptr<Request> remote(std::span<const std::int32_t> prompt, const SamplingParams& sampling, int max_tokens,
                                  std::vector<std::int32_t> stop_token_ids, double arrival);
  /// Request @p request_id, which must be waiting for remote KV; @p what names the caller.
  Request& waiting_for_kv(int request_id, const char* what);
  /// Builds the record of the step just run from @p out and @p outputs and hands it to every observer.
  void notify_step(const SchedulerOutput& out, const std::vector<RequestOutput>& outputs);
  /// True when an attached observer is active(): only then are records built.
  bool observing() const;
  /// Tells every observer about @p event.
  void notify_request(const RequestEvent& event);

  Model* model_ = nullptr;             // the model that runs the steps; null when simulated
  std::optional<SimulatedModel> sim_;  // set when simulated
  double sim_clock_ = 0;               // simulated seconds so far
  EngineConfig config_;
  int num_blocks_ = 0;
  double clock_zero_;
  std::unique_ptr<KVCache> cache_;
  std::unique_ptr<KVCacheManager> kv_manager_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<int, std::unique_ptr<Request>> requests_;
  int next_request_id_ = 0;
  StepStats last_;
  std::vector<StepObserver*> observers_;  // told about every request and step
  long num_steps_ = 0;                    // steps run, for the records
  std::map<int, int> computed_seen_;      // request id -> num_computed_tokens after the last step (observed only)
};

}  // namespace servelab
