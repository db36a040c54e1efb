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
  // One request through the serving loop: one-at-a-time scheduling, a budget
  // that fits any prompt, and a single KV block as long as the whole request
  // (the contiguous cache). The engine checks the request itself.
  const int context = model.config().max_position_embeddings;
  const long total = static_cast<long>(prompt.size()) + options.max_new_tokens;
  EngineConfig config;
  config.scheduler = {SchedulingPolicy::ONE_AT_A_TIME, 1, context};
  config.block_size = static_cast<int>(std::clamp(total, 1L, static_cast<long>(context)));
  config.kv_cache_memory = kv_cache_bytes_for(model.config(), 1, config.block_size);
  config.enable_kv_cache = options.use_kv_cache;
  Engine engine(model, config);
  const int id = engine.add_request(prompt, options.sampling, options.max_new_tokens, options.stop_token_ids, 0.0);
  // Without a cache the loop is lab 01's own: the request is checked, and the engine's one block is its scratch KV.
  if (!options.use_kv_cache) return generate_without_cache(model, engine.kv_cache(), prompt, options, on_token);

  GenerateResult result;
  result.prompt_tokens = static_cast<int>(prompt.size());
  while (engine.has_unfinished_requests()) {
    for (const RequestOutput& out : engine.step()) {
      result.step_tokens.push_back(engine.last_step().num_scheduled_tokens);
      if (on_token) on_token(out.token);
    }
  }
  const Request& r = engine.request(id);
  result.output_ids.assign(r.output_token_ids().begin(), r.output_token_ids().end());
  // Step i's time: from the previous token (the request's arrival for the first) to token i.
  const RequestMetrics m = RequestMetrics::from(r.times);
  result.step_seconds.push_back(m.ttft);
  result.step_seconds.insert(result.step_seconds.end(), m.itl.begin(), m.itl.end());
  return result;
}

GenerateResult generate_without_cache(Model& model, KVCache& cache, std::span<const std::int32_t> prompt,
                                      const GenerateOptions& options,
                                      const std::function<void(std::int32_t)>& on_token) {
  GenerateResult result;
  result.prompt_tokens = static_cast<int>(prompt.size());
  // BEGIN LAB01 SOLUTION: generate_without_cache, one forward pass over the whole sequence per new token
  Sampler sampler(options.sampling);
  std::vector<std::int32_t> sequence(prompt.begin(), prompt.end());
  for (int step = 0; step < options.max_new_tokens; ++step) {
    const double start = now_seconds();
    Batch batch;
    batch.add({0}, 0, sequence);  // from position 0: every earlier token's K and V is computed again
    const std::int32_t token = sampler.sample(model.forward(batch, cache));
    result.step_seconds.push_back(now_seconds() - start);
    result.step_tokens.push_back(static_cast<int>(sequence.size()));
    result.output_ids.push_back(token);
    sequence.push_back(token);
    if (on_token) on_token(token);
    if (std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), token) != options.stop_token_ids.end())
      break;
  }
  // END LAB01 SOLUTION
  return result;
}

}  // namespace servelab
