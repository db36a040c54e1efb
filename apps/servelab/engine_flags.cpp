// SPDX-License-Identifier: MIT
#include "engine_flags.h"

#include <CLI/CLI.hpp>

#include "core/error.h"

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
  app.add_option("--kv-cache-memory", f.kv_cache_memory, "KV bytes; 0 = max-num-seqs sequences of max-model-len");
  app.add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                 "with --backend cuda: share of device memory for weights + KV");
  app.add_option("--max-model-len", f.max_model_len, "longest prompt + output, tokens; 0 = the model's");
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
  return c;
}

}  // namespace servelab::cli
