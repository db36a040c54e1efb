// SPDX-License-Identifier: MIT
#include "engine_flags.h"

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "kv/kv_budget.h"
#include "kv/kv_cache.h"

namespace servelab::cli {

void add_engine_flags(CLI::App& app, EngineFlags& f) {
  add_model_flags(app, f);
  app.add_option("--max-num-seqs", f.max_num_seqs, "most requests in one step")->capture_default_str();
  app.add_option("--max-num-batched-tokens", f.max_num_batched_tokens, "most tokens in one step")
      ->capture_default_str();
  app.add_flag("--enable-chunked-prefill", f.enable_chunked_prefill, "split long prompts over steps (lab 06)");
  app.add_option("--long-prefill-token-threshold", f.long_prefill_token_threshold,
                 "with --enable-chunked-prefill: most prompt tokens of one request in one step; 0 = only the budget")
      ->capture_default_str();
  app.add_option("--block-size", f.block_size, "tokens per KV block")->capture_default_str();
  app.add_option("--kv-cache-memory", f.kv_cache_memory,
                 "KV bytes; 0 = room for max-num-seqs prompts of min(max-model-len, max-num-batched-tokens) and one "
                 "max-model-len sequence, capped at min(4 GiB, MemAvailable / 4)");
  app.add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                 "with --backend cuda: share of device memory for weights + KV");
  app.add_option("--max-model-len", f.max_model_len, "longest prompt + output, tokens; 0 = the model's");
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", f.enable_prefix_caching,
               "share the KV blocks of prompts' common prefixes between requests (on by default)");
}

EngineConfig engine_config(const EngineFlags& f) {
  check(f.long_prefill_token_threshold >= 0,
        "--long-prefill-token-threshold must be >= 0 (0 = only the budget limits a chunk), got ",
        f.long_prefill_token_threshold);
  check(f.long_prefill_token_threshold == 0 || f.enable_chunked_prefill,
        "--long-prefill-token-threshold caps the chunks of a split prompt, so it needs --enable-chunked-prefill");
  EngineConfig c;
  c.scheduler.policy = SchedulingPolicy::CONTINUOUS;
  c.scheduler.max_num_seqs = f.max_num_seqs;
  c.scheduler.max_num_batched_tokens = f.max_num_batched_tokens;
  c.scheduler.enable_chunked_prefill = f.enable_chunked_prefill;
  c.scheduler.long_prefill_token_threshold = f.long_prefill_token_threshold;
  c.block_size = f.block_size;
  c.kv_cache_memory = f.kv_cache_memory;
  c.gpu_memory_utilization = f.gpu_memory_utilization;
  c.max_model_len = f.max_model_len;
  c.enable_prefix_caching = f.enable_prefix_caching;
  return c;
}

EngineConfig engine_config(const EngineFlags& f, const ModelConfig& model,
                           const std::function<void(const std::string&)>& log) {
  EngineConfig c = engine_config(f);
  if (f.kv_cache_memory > 0 || f.gpu_memory_utilization > 0) return c;
  // Checked here with the Engine's words: the budget is computed before the Engine is.
  check(f.max_num_seqs >= 1, "--max-num-seqs must be >= 1, got ", f.max_num_seqs);
  check(f.max_num_batched_tokens >= 1, "--max-num-batched-tokens must be >= 1, got ", f.max_num_batched_tokens);
  check(f.block_size >= 1, "--block-size must be >= 1, got ", f.block_size);
  check(f.max_model_len >= 0 && f.max_model_len <= model.max_position_embeddings, "--max-model-len must be in [1, ",
        model.max_position_embeddings, "] (max_position_embeddings of model ", model.name, "), got ", f.max_model_len);
  const int max_model_len = f.max_model_len > 0 ? f.max_model_len : model.max_position_embeddings;
  const KVBudget budget = default_kv_budget(kv_cache_bytes_for(model, 1, 1), f.block_size, f.max_num_seqs,
                                            max_model_len, f.max_num_batched_tokens, mem_available_bytes());
  c.kv_cache_memory = budget.bytes;
  if (log) log(budget.describe() + "; --kv-cache-memory sets another");
  return c;
}

}  // namespace servelab::cli
