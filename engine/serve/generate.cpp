// SPDX-License-Identifier: MIT
#include "serve/generate.h"

#include <algorithm>

#include "core/timer.h"
#include "serve/engine.h"

namespace servelab {

RequestMetrics GenerateResult::metrics() const {
  RequestTimes times;
  times.first_scheduled = 0;
  double at = 0;
  for (double s : step_seconds) times.token_times.push_back(at += s);
  return RequestMetrics::from(times);
}

double GenerateResult::prefill_tokens_per_second() const { return ttft() > 0 ? prompt_tokens / ttft() : 0.0; }

double GenerateResult::decode_tokens_per_second() const { return tpot() > 0 ? 1.0 / tpot() : 0.0; }

GenerateResult generate(Model& model, std::span<const std::int32_t> prompt, const GenerateOptions& options,
                        const std::function<void(std::int32_t)>& on_token) {
  // The engine checks the request as it checks any, and makes the contiguous cache: one block as
  // long as the whole request (unused with use_kv_cache off). The steps are generate_loop()'s, with no scheduler.
  const int context = model.config().max_position_embeddings;
  const long total = static_cast<long>(prompt.size()) + options.max_new_tokens;
  EngineConfig config;
  config.scheduler = {SchedulingPolicy::ONE_AT_A_TIME, 1, context};
  config.block_size = static_cast<int>(std::clamp(total, 1L, static_cast<long>(context)));
  config.kv_cache_memory = kv_cache_bytes_for(model.config(), 1, config.block_size);
  Engine engine(model, config);
  engine.add_request(prompt, options.sampling, options.max_new_tokens, options.stop_token_ids, 0.0);
  return generate_loop(model, engine.kv_cache(), prompt, options, on_token);
}

namespace {

/**
 * @brief The token @p sampler picks after one forward of @p batch: through
 *        @p cache, or with no cache at all when @p cache is null (lab 01's
 *        recompute, which then reads nothing of lab 02's cache code). A
 *        greedy sampler takes Model::forward_greedy(), which on CUDA picks
 *        on the device. [[maybe_unused]]: in a starter tree only lab 01's stubbed region calls it.
 */
[[maybe_unused]] std::int32_t next_token(Model& model, KVCache* cache, Sampler& sampler, const Batch& batch) {
  if (sampler.greedy()) return (cache ? model.forward_greedy(batch, *cache) : model.forward_greedy(batch))[0];
  return sampler.sample(cache ? model.forward(batch, *cache) : model.forward(batch));
}

/**
 * @brief Step k of generate_loop() (generate.h states the rules): feeds
 *        @p sequence from index @p first, samples one token with @p sampler,
 *        and records it in @p result (output_ids, step_tokens, step_seconds),
 *        in @p sequence and through @p on_token.
 * @return false when the token is one of options.stop_token_ids: generation ends after it.
 */
bool generate_step(Model& model, KVCache* cache, Sampler& sampler, std::vector<std::int32_t>& sequence, int first,
                   const GenerateOptions& options, const std::function<void(std::int32_t)>& on_token,
                   GenerateResult& result) {
  // BEGIN LAB01 SOLUTION: generate_loop, one step: feed the sequence from `first`, sample, record, stop on a stop token
  const double start = now_seconds();
  Batch batch;
  batch.add({0}, first, std::span(sequence).subspan(static_cast<std::size_t>(first)));
  const std::int32_t token = next_token(model, cache, sampler, batch);
  result.step_seconds.push_back(now_seconds() - start);
  result.step_tokens.push_back(static_cast<int>(sequence.size()) - first);
  result.output_ids.push_back(token);
  sequence.push_back(token);
  if (on_token) on_token(token);
  return std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), token) == options.stop_token_ids.end();
  // END LAB01 SOLUTION
}

}  // namespace

GenerateResult generate_loop(Model& model, KVCache& cache, std::span<const std::int32_t> prompt,
                             const GenerateOptions& options, const std::function<void(std::int32_t)>& on_token) {
  GenerateResult result;
  result.prompt_tokens = static_cast<int>(prompt.size());
  Sampler sampler(options.sampling);
  std::vector<std::int32_t> sequence(prompt.begin(), prompt.end());  // prompt, then each new token
  for (int step = 0; step < options.max_new_tokens; ++step) {
    int first = 0;  // the first token this step feeds; without a cache always 0
    if (options.use_kv_cache) {
      // BEGIN LAB02 SOLUTION: generate_loop, with the cache a step feeds only the tokens whose K and V it lacks
      first = step == 0 ? 0 : static_cast<int>(sequence.size()) - 1;  // the prompt, then the newest token
      // END LAB02 SOLUTION
    }
    KVCache* through = options.use_kv_cache ? &cache : nullptr;  // without one, nothing is kept between steps
    if (!generate_step(model, through, sampler, sequence, first, options, on_token, result)) break;
  }
  return result;
}

}  // namespace servelab
