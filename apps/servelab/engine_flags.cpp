#include "engine_flags.h"

#include <iostream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"

namespace servelab::cli {

void add_engine_flags(CLI::App& app, EngineFlags& f) {
  auto* preset = app.add_option("--preset", f.preset, "named model shape with synthetic weights")->capture_default_str();
  app.add_option("--model", f.model_dir, "Hugging Face model folder (config.json, *.safetensors, tokenizer.json)")
      ->excludes(preset);
  app.add_option("--weights-seed", f.weights_seed, "seed of synthetic weights")->capture_default_str();
  app.add_option("--backend", f.backend, "cpu or cuda")->capture_default_str();
  app.add_option("--dtype", f.dtype, "f32, bf16 (weights) or bf16-math (weights and prefill arithmetic)")->capture_default_str();
  app.add_option("--attention", f.attention, "attention kernels: naive, blocked or flash")->capture_default_str();
  app.add_option("--threads", f.threads, "CPU threads, 0 = all cores")->capture_default_str();
  app.add_flag("--deterministic", f.deterministic, "batch-invariant reductions: a request's tokens do not depend on its batch");
  app.add_option("--max-num-seqs", f.max_num_seqs, "most requests in one step")->capture_default_str();
  app.add_option("--max-num-batched-tokens", f.max_num_batched_tokens, "most tokens in one step")->capture_default_str();
  app.add_flag("--enable-chunked-prefill", f.enable_chunked_prefill, "split long prompts over steps (lab 06)");
  app.add_option("--block-size", f.block_size, "tokens per KV block")->capture_default_str();
  app.add_option("--kv-cache-memory", f.kv_cache_memory, "KV bytes; 0 = max-num-seqs sequences of max-model-len");
  app.add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                 "with --backend cuda: share of device memory for weights + KV");
  app.add_option("--max-model-len", f.max_model_len, "longest prompt + output, tokens; 0 = the model's");
}

ModelOptions model_options(const std::string& backend, int threads, bool deterministic, const std::string& attention,
                             const std::string& dtype) {
  check(threads >= 0 && threads <= kMaxThreads, "--threads must be in [0, ", kMaxThreads, "] (0 = all cores), got ",
        threads);
  ModelOptions options;
  options.backend = parse_backend(backend, "--backend");
  options.num_threads = threads;
  options.deterministic = deterministic;
  options.attention = parse_attention_kind(attention, "--attention");
  apply_dtype_flag(dtype, "--dtype", options);
  return options;
}

std::unique_ptr<Model> load_model(const EngineFlags& f) {
  const ModelOptions options = model_options(f.backend, f.threads, f.deterministic, f.attention, f.dtype);
  std::cerr << "loading " << (f.model_dir.empty() ? "preset " + f.preset + " (synthetic weights)" : f.model_dir)
            << " ...\n";
  return f.model_dir.empty() ? Model::from_preset(f.preset, f.weights_seed, options)
                             : Model::from_pretrained(f.model_dir, options);
}

EngineConfig engine_config(const EngineFlags& f) {
  EngineConfig c;
  c.scheduler.policy = SchedulingPolicy::CONTINUOUS;
  c.scheduler.max_num_seqs = f.max_num_seqs;
  c.scheduler.max_num_batched_tokens = f.max_num_batched_tokens;
  c.scheduler.enable_chunked_prefill = f.enable_chunked_prefill;
  c.block_size = f.block_size;
  c.kv_cache_memory = f.kv_cache_memory;
  c.gpu_memory_utilization = f.gpu_memory_utilization;
  c.max_model_len = f.max_model_len;
  return c;
}

}  // namespace servelab::cli
