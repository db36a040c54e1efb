#include "serve/generate.h"

#include <algorithm>
#include <numeric>
#include <memory>

#include "core/error.h"
#include "core/timer.h"

namespace servelab {

double GenerateResult::e2e() const { return std::accumulate(step_seconds.begin(), step_seconds.end(), 0.0); }

double GenerateResult::tpot() const {
  if (step_seconds.size() < 2) return 0.0;
  return (e2e() - ttft()) / static_cast<double>(step_seconds.size() - 1);
}

double GenerateResult::prefill_tokens_per_second() const { return ttft() > 0 ? prompt_tokens / ttft() : 0.0; }

double GenerateResult::decode_tokens_per_second() const { return tpot() > 0 ? 1.0 / tpot() : 0.0; }

GenerateResult generate(Model& model, std::span<const std::int32_t> prompt, const GenerateOptions& options,
                        const std::function<void(std::int32_t)>& on_token) {
  const ModelConfig& c = model.config();
  check(!prompt.empty(), "prompt is empty (expected at least one token)");
  check(options.max_new_tokens >= 1, "--max-new-tokens must be >= 1, got ", options.max_new_tokens);
  const long total = static_cast<long>(prompt.size()) + options.max_new_tokens;
  check(total <= c.max_position_embeddings, "prompt (", prompt.size(), " tokens) + --max-new-tokens (",
        options.max_new_tokens, ") = ", total, " exceeds max_position_embeddings (", c.max_position_embeddings,
        ") of model ", c.name);
  for (std::int32_t id : prompt)
    check(id >= 0 && id < c.vocab_size, "prompt token id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")");

  Sampler sampler(options.sampling);
  GenerateResult result;
  result.prompt_tokens = static_cast<int>(prompt.size());
  std::vector<std::int32_t> sequence(prompt.begin(), prompt.end());
  std::unique_ptr<KVCache> cache;
  if (options.use_kv_cache) cache = model.make_kv_cache(1, static_cast<int>(total));

  for (int step = 0; step < options.max_new_tokens; ++step) {
    const double start = now_seconds();
    Batch batch;
    if (options.use_kv_cache) {
      // Prefill feeds the prompt; each decode step feeds only the newest token.
      const int computed = step == 0 ? 0 : static_cast<int>(sequence.size()) - 1;
      batch.add(0, computed, std::span(sequence).subspan(computed));
    } else {
      // use_cache=False: a fresh cache each step, filled by recomputing every token.
      cache = model.make_kv_cache(1, static_cast<int>(sequence.size()));
      batch.add(0, 0, sequence);
    }
    const std::vector<float> logits = model.forward(batch, *cache);
    const std::int32_t next = sampler.sample(logits);
    result.step_seconds.push_back(now_seconds() - start);
    result.step_tokens.push_back(batch.num_tokens());
    result.output_ids.push_back(next);
    sequence.push_back(next);
    if (on_token) on_token(next);
    if (std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), next) != options.stop_token_ids.end())
      break;
  }
  return result;
}

}  // namespace servelab
