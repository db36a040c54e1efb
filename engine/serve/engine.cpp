// SPDX-License-Identifier: MIT
#include "serve/engine.h"

#include <algorithm>
#include <iostream>
#include <limits>

#include "core/error.h"
#include "core/timer.h"

namespace servelab {

namespace {

// With no budget given, room for max_num_seqs full-length sequences, but no more than
// vLLM's default CPU KV space (VLLM_CPU_KVCACHE_SPACE, 4 GiB): a long context times
// a large batch would otherwise reserve more memory than a laptop has.
constexpr std::size_t kDefaultMaxKVBytes = std::size_t{4} << 30;

}  // namespace

Engine::Engine(Model& model, EngineConfig config)
    : model_(&model), config_(std::move(config)), clock_zero_(now_seconds()) {
  if (config_.gpu_memory_utilization > 0)
    config_.kv_cache_memory = model.device_kv_memory(config_.gpu_memory_utilization);
  init(model.config(), kv_cache_bytes_for(model.config(), 1, 1));
  // Last: every setting is checked before memory is taken. The step buffers are sized here, once.
  model.reserve(std::max(1, config_.scheduler.max_num_batched_tokens),
                std::clamp(config_.scheduler.max_num_seqs, 1, std::max(1, config_.scheduler.max_num_batched_tokens)));
  cache_ = model.make_kv_cache(num_blocks_, config_.block_size);
}

Engine::Engine(const SimulatedModel& model, EngineConfig config)
    : sim_(model), config_(std::move(config)), clock_zero_(now_seconds()) {
  check(config_.gpu_memory_utilization == 0, "--gpu-memory-utilization: a simulated engine takes --kv-cache-memory");
  const ModelConfig& c = model.config;
  init(c, kv_bytes_per_token(c, model.dtypes.kv));
}

void Engine::init(const ModelConfig& c, std::size_t kv_bytes_per_token) {
  if (config_.max_model_len == 0) config_.max_model_len = c.max_position_embeddings;
  check(config_.max_model_len >= 1 && config_.max_model_len <= c.max_position_embeddings,
        "--max-model-len must be in [1, ", c.max_position_embeddings, "] (max_position_embeddings of model ", c.name,
        "), got ", config_.max_model_len);
  check(config_.block_size >= 1, "--block-size must be >= 1, got ", config_.block_size);
  const std::size_t block_bytes = kv_bytes_per_token * static_cast<std::size_t>(config_.block_size);
  if (config_.kv_cache_memory == 0) {
    const std::size_t per_seq =
        block_bytes * static_cast<std::size_t>((config_.max_model_len + config_.block_size - 1) / config_.block_size);
    config_.kv_cache_memory =
        std::min(kDefaultMaxKVBytes, per_seq * static_cast<std::size_t>(std::max(1, config_.scheduler.max_num_seqs)));
  }
  check(config_.num_gpu_blocks_override >= 0, "--num-blocks must be >= 0, got ", config_.num_gpu_blocks_override);
  if (config_.num_gpu_blocks_override > 0)
    config_.kv_cache_memory = block_bytes * static_cast<std::size_t>(config_.num_gpu_blocks_override);
  const std::size_t blocks = config_.kv_cache_memory / block_bytes;
  check(blocks >= 1, "--kv-cache-memory ", config_.kv_cache_memory, " bytes holds no KV block (one block of ",
        config_.block_size, " tokens of model ", c.name, " takes ", block_bytes, " bytes)");
  check(blocks <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()), "--kv-cache-memory ",
        config_.kv_cache_memory, " bytes is more than 2^31 blocks; use a larger --block-size");
  num_blocks_ = static_cast<int>(blocks);
  if (!config_.log) config_.log = [](const std::string& line) { std::cerr << "servelab: " << line << "\n"; };
  kv_manager_ = std::make_unique<KVCacheManager>(num_blocks_, config_.block_size, config_.enable_prefix_caching);
  scheduler_ = std::make_unique<Scheduler>(config_.scheduler, *kv_manager_, config_.log);
}

void Engine::advance_clock_to(double seconds) {
  check(sim_.has_value(), "engine: only a simulated engine's clock can be moved");
  sim_clock_ = std::max(sim_clock_, seconds);
}

KVCache& Engine::kv_cache() {
  check(cache_ != nullptr, "engine: a simulated engine has no KV storage");
  return *cache_;
}

double Engine::now() const { return sim_ ? sim_clock_ : now_seconds() - clock_zero_; }

void Engine::check_request(std::span<const std::int32_t> prompt, const SamplingParams& sampling, int max_tokens) const {
  const ModelConfig& c = model_ ? model_->config() : sim_->config;
  sampling.validate();
  check(!prompt.empty(), "prompt is empty (expected at least one token)");
  check(max_tokens >= 1, "--max-new-tokens must be >= 1, got ", max_tokens);
  for (std::int32_t id : prompt)
    check(id >= 0 && id < c.vocab_size, "prompt token id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")");
  const long total = static_cast<long>(prompt.size()) + max_tokens;
  if (total > config_.max_model_len) {
    const std::string limit = config_.max_model_len == c.max_position_embeddings
                                  ? "max_position_embeddings (" + std::to_string(c.max_position_embeddings) + ")"
                                  : "--max-model-len (" + std::to_string(config_.max_model_len) + ")";
    fail("prompt (", prompt.size(), " tokens) + --max-new-tokens (", max_tokens, ") = ", total, " exceeds ", limit,
         " of model ", c.name);
  }
  check(config_.scheduler.enable_chunked_prefill ||
            static_cast<long>(prompt.size()) <= config_.scheduler.max_num_batched_tokens,
        "prompt of ", prompt.size(), " tokens exceeds --max-num-batched-tokens ",
        config_.scheduler.max_num_batched_tokens,
        " (a whole prompt must fit one step; --enable-chunked-prefill splits it)");
  const int blocks = kv_manager_->num_blocks_for(total);
  check(blocks <= num_blocks_, "request of up to ", total, " tokens needs ", blocks,
        " KV blocks but the whole cache has ", num_blocks_, " (", config_.kv_cache_memory, " bytes); raise ",
        config_.num_gpu_blocks_override > 0 ? "--num-blocks" : "--kv-cache-memory", " or shorten the request");
}

int Engine::queue(std::unique_ptr<Request> request) {
  const int id = request->request_id;
  scheduler_->add_request(request.get());
  if (observing())
    notify_request(
        {RequestEvent::Kind::ADDED, id, request->times.arrival, request->num_prompt_tokens(), request->max_tokens});
  requests_.emplace(id, std::move(request));
  return id;
}

int Engine::add_request(std::span<const std::int32_t> prompt, const SamplingParams& sampling, int max_tokens,
                        std::vector<std::int32_t> stop_token_ids, double arrival) {
  check_request(prompt, sampling, max_tokens);
  return queue(std::make_unique<Request>(next_request_id_++, prompt, sampling, max_tokens, std::move(stop_token_ids),
                                         arrival < 0 ? now() : arrival));
}

std::unique_ptr<Request> Engine::remote(std::span<const std::int32_t> prompt, const SamplingParams& sampling,
                                        int max_tokens, std::vector<std::int32_t> stop_token_ids, double arrival) {
  check_request(prompt, sampling, max_tokens);
  auto request = std::make_unique<Request>(next_request_id_, prompt, sampling, max_tokens, std::move(stop_token_ids),
                                           arrival < 0 ? now() : arrival);
  request->status = RequestStatus::WAITING_FOR_REMOTE_KV;
  return request;
}

std::optional<int> Engine::add_remote_request(std::span<const std::int32_t> prompt, const SamplingParams& sampling,
                                              int max_tokens, std::vector<std::int32_t> stop_token_ids,
                                              double arrival) {
  check(!sim_.has_value(), "engine: a simulated engine has no KV to receive (add_prefilled_request queues one)");
  std::unique_ptr<Request> request = remote(prompt, sampling, max_tokens, std::move(stop_token_ids), arrival);
  // The prompt's blocks now: their ids go to the prefill side, which writes the KV into them.
  if (!kv_manager_->allocate_slots(*request, request->num_prompt_tokens())) return std::nullopt;
  ++next_request_id_;
  return queue(std::move(request));
}

Request& Engine::waiting_for_kv(int request_id, const char* what) {
  const auto it = requests_.find(request_id);
  check(it != requests_.end(), what, ": unknown request id ", request_id);
  Request& r = *it->second;
  check(r.status == RequestStatus::WAITING_FOR_REMOTE_KV, what, ": request ", request_id, " is ", to_string(r.status),
        ", not waiting for remote KV");
  return r;
}

void Engine::kv_arrived(int request_id, std::int32_t first_token, double first_token_time) {
  [[maybe_unused]] Request& r =
      waiting_for_kv(request_id, "kv_arrived");  // a starter tree stubs the region that reads it
  const int vocab = model_ ? model_->config().vocab_size : sim_->config.vocab_size;
  check(first_token >= 0 && first_token < vocab, "first token ", first_token, " is outside the vocabulary [0, ", vocab,
        ")");
  // BEGIN LAB07 SOLUTION: Engine::kv_arrived, the prompt's KV is here: the prompt counts as computed, the first token joins
  // The prompt's KV is here; the first token is fed (and its KV computed) by the next step.
  r.status = RequestStatus::WAITING;
  r.num_computed_tokens = r.num_prompt_tokens();
  r.sampler.skip(1);
  r.append_output_token(first_token, first_token_time);
  if (r.is_finished()) scheduler_->remove_finished(&r);
  // END LAB07 SOLUTION
}

void Engine::compute_prompt_locally(int request_id) {
  waiting_for_kv(request_id, "compute_prompt_locally").status = RequestStatus::WAITING;
}

int Engine::add_prefilled_request(std::span<const std::int32_t> prompt, const SamplingParams& sampling, int max_tokens,
                                  std::int32_t first_token, double arrival, double first_token_time) {
  check(sim_.has_value(), "engine: a real engine must receive a prefilled request's KV (add_remote_request)");
  check(max_tokens >= 2, "a prefilled request must want at least 2 tokens (the first came from prefill), got ",
        max_tokens);
  // The remote path without taking the prompt's blocks now: a simulated engine has no KV to
  // write into them, so the scheduler takes them all at admission.
  const int id = queue(remote(prompt, sampling, max_tokens, {}, arrival));
  ++next_request_id_;
  kv_arrived(id, first_token, first_token_time);
  return id;
}

bool Engine::abort_request(int request_id) {
  const auto it = requests_.find(request_id);
  const bool aborted = it != requests_.end() && scheduler_->abort_request(it->second.get(), now());
  if (aborted && observing()) notify_request({RequestEvent::Kind::ABORTED, request_id, now()});
  return aborted;
}

std::vector<RequestOutput> Engine::step() {
  last_ = StepStats{};
  last_.start = now();
  const double t0 = now_seconds();
  const SchedulerOutput out = scheduler_->schedule();
  const double t1 = now_seconds();
  last_.num_preempted = static_cast<int>(out.preempted_request_ids.size());
  last_.num_used_blocks = kv_manager_->block_pool().num_blocks() - kv_manager_->block_pool().num_free_blocks();
  std::vector<RequestOutput> outputs;
  if (!out.empty()) {
    Batch batch;
    std::vector<SeqShape> shapes;    // the step's work, for the stats and the simulated clock
    std::vector<Request*> sampling;  // requests that catch up with their tokens in this step get one
    for (const ScheduledRequest& s : out.scheduled) {
      Request& r = *s.request;
      if (r.times.first_scheduled < 0) r.times.first_scheduled = last_.start;
      const bool samples = r.num_computed_tokens + s.num_new_tokens == r.num_tokens();
      // A decode feeds the newest output token; anything else is prompt (or recomputation) work.
      const bool decode = s.num_new_tokens == 1 && samples && r.num_output_tokens() > 0;
      (decode ? last_.num_decode_tokens : last_.num_prefill_tokens) += s.num_new_tokens;
      shapes.push_back({r.num_computed_tokens, s.num_new_tokens});
      if (!sim_) {
        batch.add(kv_manager_->block_table(r.request_id).block_ids(), r.num_computed_tokens,
                  r.all_token_ids().subspan(static_cast<std::size_t>(r.num_computed_tokens),
                                            static_cast<std::size_t>(s.num_new_tokens)),
                  samples ? LogitsFor::Last : LogitsFor::None);
      }
      if (samples) sampling.push_back(&r);
    }
    std::vector<std::int32_t> tokens;
    const auto logits_rows = static_cast<std::int64_t>(sampling.size());
    last_.work = sim_ ? step_work(sim_->config, sim_->dtypes, shapes, logits_rows)
                      : step_work(model_->config(), {model_->options().weight_dtype, DType::F32, DType::F32}, shapes,
                                  logits_rows);
    if (sim_) {
      // No model: the cost model says how long this step would take, and every request gets token 0.
      last_.forward_seconds = sim_->cost.predict(last_.work);
      sim_clock_ += last_.forward_seconds;
      tokens.assign(sampling.size(), 0);
      const double t2 = now_seconds();
      scheduler_->update_from_output(out, tokens, now(), config_.enable_kv_cache);
      last_.update_seconds = now_seconds() - t2;
      last_.schedule_seconds = t1 - t0;
    } else {
      // Every sampled request greedy: the model returns the argmax alone (on CUDA it picks on the
      // device and copies back 4 bytes per request instead of a row of logits).
      const bool all_greedy =
          std::all_of(sampling.begin(), sampling.end(), [](const Request* r) { return r->sampler.greedy(); });
      if (all_greedy) {
        tokens = model_->forward_greedy(batch, *cache_);
      } else {
        const std::vector<float> logits = model_->forward(batch, *cache_);
        const double sample_start = now_seconds();
        const auto V = static_cast<std::size_t>(model_->config().vocab_size);
        // Each request draws from its own sampler, so the rows may go to any thread in any order.
        tokens.assign(sampling.size(), 0);
        model_->pool().parallel_for(sampling.size(), [&](std::size_t r0, std::size_t r1) {
          for (std::size_t i = r0; i < r1; ++i)
            tokens[i] = sampling[i]->sampler.sample(std::span(logits).subspan(i * V, V));
        });
        last_.sample_seconds = now_seconds() - sample_start;
      }
      const double t2 = now_seconds();
      scheduler_->update_from_output(out, tokens, now(), config_.enable_kv_cache);
      last_.forward_seconds = t2 - t1;
      last_.update_seconds = now_seconds() - t2;
      last_.schedule_seconds = (t1 - t0) + last_.update_seconds;
    }
    for (std::size_t i = 0; i < sampling.size(); ++i)
      outputs.push_back({sampling[i]->request_id, tokens[i], sampling[i]->finish_reason});
  } else {
    last_.schedule_seconds = t1 - t0;
  }
  last_.num_scheduled_requests = static_cast<int>(out.scheduled.size());
  last_.num_scheduled_tokens = out.total_num_scheduled_tokens;
  last_.num_sampled = static_cast<int>(outputs.size());
  last_.num_running = static_cast<int>(scheduler_->running().size());
  last_.num_waiting = static_cast<int>(scheduler_->waiting().size());
  if (observing()) notify_step(out, outputs);
  ++num_steps_;
  return outputs;
}

const Request& Engine::request(int request_id) const {
  const auto it = requests_.find(request_id);
  check(it != requests_.end(), "engine: unknown request id ", request_id);
  return *it->second;
}

std::vector<const Request*> Engine::requests() const {
  std::vector<const Request*> out;
  for (const auto& [id, r] : requests_) out.push_back(r.get());
  return out;
}

void Engine::release_request(int request_id) {
  const auto it = requests_.find(request_id);
  check(it != requests_.end() && it->second->is_finished(), "engine: request ", request_id,
        " is unknown or still running; only finished requests can be released");
  kv_manager_->free(*it->second);  // what hold_finished_kv kept; nothing otherwise
  requests_.erase(it);
}

}  // namespace servelab
