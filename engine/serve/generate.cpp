// SPDX-License-Identifier: MIT
#include "serve/generate.h"

#include <algorithm>

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

}  // namespace servelab
