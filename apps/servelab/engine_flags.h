/**
 * @file engine_flags.h
 * @brief The model and engine flags that `servelab serve` and
 *        `servelab bench serve --compare-in-process` share, with vLLM's names,
 *        so the in-process engine a benchmark compares with is set up exactly
 *        as the server's.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "model/model.h"
#include "serve/engine.h"

namespace servelab::cli {

/// The flags' values.
struct EngineFlags {
  std::string preset = "tiny";        ///< --preset: a named shape with synthetic weights
  std::string model_dir;              ///< --model: a Hugging Face model folder instead
  std::uint64_t weights_seed = 0;     ///< --weights-seed: seed of synthetic weights
  std::string backend = "cpu";        ///< --backend
  std::string dtype = "f32";          ///< --dtype: weight dtype
  std::string attention = "blocked";  ///< --attention: kernels
  int threads = 0;                    ///< --threads: CPU threads, 0 = all cores
  bool deterministic = false;         ///< --deterministic: batch-invariant reductions
  int max_num_seqs = 16;              ///< --max-num-seqs
  int max_num_batched_tokens = 2048;  ///< --max-num-batched-tokens
  bool enable_chunked_prefill = false;  ///< --enable-chunked-prefill
  int block_size = 16;                ///< --block-size
  std::size_t kv_cache_memory = 0;    ///< --kv-cache-memory, bytes; 0 = max-num-seqs sequences of max-model-len
  double gpu_memory_utilization = 0;  ///< --gpu-memory-utilization (CUDA)
  int max_model_len = 0;              ///< --max-model-len; 0 = the model's
};

/// Registers the flags on @p app; --model and --preset exclude each other.
void add_engine_flags(CLI::App& app, EngineFlags& flags);

/**
 * @brief The model options every command takes from its flags (--backend, --threads, --deterministic,
 *        --attention, --dtype), parsed and checked.
 * @throws Error naming the flag when a value is unknown or --threads is outside [0, kMaxThreads].
 */
ModelOptions model_options(const std::string& backend, int threads, bool deterministic, const std::string& attention,
                             const std::string& dtype);

/**
 * @brief Loads the model the flags name.
 * @throws Error naming the flag when a value is out of range or the model cannot be loaded.
 */
std::unique_ptr<Model> load_model(const EngineFlags& flags);

/// The engine configuration the flags describe (continuous batching; checked by the Engine).
EngineConfig engine_config(const EngineFlags& flags);

}  // namespace servelab::cli
