// SPDX-License-Identifier: MIT
/**
 * @file cuda_model.h
 * @brief Model::forward() on a CUDA GPU: the same decoder step as the CPU
 *        path in model/model.cpp, op for op, with cuBLAS for the GEMMs and
 *        the kernels of cuda/ops.h for the rest.
 *
 * Model owns one of these, through the ModelBackend interface
 * (model/backend.h), when ModelOptions::backend is CUDA and forwards to it;
 * nothing else in the engine changes. One step:
 * @verbatim
 *  host: token ids, each row's (sequence, position), the block tables, each
 *        (layer, sequence)'s KVView, logits rows  ── one async upload from pinned memory ──►  device
 *  device: embedding → rmsnorm → per layer [ qkv GEMM → bias+RoPE+KV write (fused)
 *          → attention → o GEMM → residual+rmsnorm (fused) → gate/up GEMM
 *          → silu·mul → down GEMM → residual+next layer's rmsnorm (fused) ]
 *          → gather logits rows → rmsnorm → LM head GEMM [→ argmax when greedy]
 *  device ── one async download into pinned memory, one wait ──► host: [rows, vocab] logits or [rows] tokens
 * @endverbatim
 * Built for decode, which is bound by the bytes of weights it reads:
 * - Buffers are sized once, from the KV cache's capacity when the cache is
 *   made (and by reserve()); a step inside that plan allocates nothing. A
 *   larger step grows the plan once (stats().plan_growths counts it).
 * - The norms and SiLU·mul emit the next GEMM's input in the weights' dtype
 *   (bf16), so there is no separate narrowing pass; bias, RoPE and the KV
 *   write are one kernel (cuda/fused.cu).
 * - A decode step (one new token per sequence) is captured as a CUDA Graph
 *   the first time its shape (batch size, logits rows, greedy or not) is
 *   seen and replayed after that: one launch instead of ~10 per layer
 *   (cuda/graph.h). Every per-step input sits at a fixed device address.
 * - forward_greedy() takes the argmax on the device: 4 bytes per row come
 *   back instead of a row of vocab_size floats.
 * - The only host wait is the copy of the result; it also surfaces a fault
 *   in any op of the step, even one with no logits rows.
 * Weights are uploaded once, at construction, in the model's weight dtype
 * (q/k/v and gate/up stacked, as on the CPU); the KV cache is a CudaKVCache.
 * Every op runs on this thread's default stream (cudaStreamPerThread).
 * Attention is attend(): the naive kernel today, the split-K decode kernel
 * (lab 05) for decode steps once it lands.
 *
 * Not the same bits as the CPU: cuBLAS and the block reductions sum in other
 * orders, and with bf16 weights the GEMM inputs are rounded to bf16 (see
 * cuda/gemm.h). Deterministic mode (KernelContext::deterministic) is a CPU
 * switch: cuBLAS chooses its algorithm by shape, so rows are reproducible
 * run to run on one GPU but not batch-invariant.
 *
 * Plain C++ interface; in a build without CUDA the constructor throws.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/model_config.h"
#include "kv/kv_cache.h"
#include "model/backend.h"
#include "model/batch.h"
#include "model/weights.h"

namespace servelab {

namespace cuda {
struct AttentionRow;
}

/// What the CUDA backend did across its steps (for tests and benchmarks).
struct CudaStepStats {
  long steps = 0;          ///< forward() and forward_greedy() calls
  long plan_growths = 0;   ///< times the buffers were (re)allocated: at make_kv_cache(), reserve(), or an outsized step
  long graph_replays = 0;  ///< decode steps that replayed a captured graph
};

/// The CUDA implementation behind Model (not thread-safe: one set of device buffers).
class CudaModel final : public ModelBackend {
 public:
  /**
   * @brief Uploads the weights and the RoPE inverse frequencies to the current device.
   * @param weights  host weights (f32 or bf16 matrices, f32 norms and biases); read, not kept.
   * @param inv_freq [head_dim / 2] RoPE inverse frequencies.
   * @throws Error naming the failed CUDA call (no device, out of memory), or
   *         saying the build has no CUDA.
   */
  CudaModel(const ModelConfig& config, const ModelWeights& weights, const std::vector<float>& inv_freq);
  ~CudaModel() override;
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  /**
   * @brief One step over a ragged batch; the contract of Model::forward(),
   *        which has already checked @p batch against @p cache.
   * @param cache a CudaKVCache (from make_kv_cache()).
   * @return [batch.logits_indices.size(), vocab_size] logits, row-major, on the host.
   * @throws Error when @p cache is not in device memory or a CUDA call fails.
   */
  std::vector<float> forward(const Batch& batch, KVCache& cache) override;

  /// forward() with the argmax of each logits row taken on the device; returns [rows] token ids.
  std::vector<std::int32_t> forward_greedy(const Batch& batch, KVCache& cache) override;

  /**
   * @brief Sizes the step buffers for steps of up to @p max_tokens tokens over
   *        @p max_seqs sequences now (the scheduler's max_num_batched_tokens
   *        and max_num_seqs), so no later step within them allocates.
   * @throws Error when max_seqs is not in [1, max_tokens], or out of memory.
   */
  void reserve(int max_tokens, int max_seqs) override;

  /// Counters of steps, buffer growths and graph replays.
  const CudaStepStats& stats() const;

  /// Turns the CUDA Graph capture of decode steps on (the default) or off (every op launched one by one).
  void set_graphs(bool on);

  /// A CudaKVCache of @p num_blocks blocks of @p block_size tokens for this model; sizes the step buffers for it.
  std::unique_ptr<KVCache> make_kv_cache(int num_blocks, int block_size) const override;

  /// cudaMemGetInfo: free and total bytes of the current device.
  std::pair<std::size_t, std::size_t> memory_info() const override;

 private:
  // Uploads the step's inputs, queues (or replays) its ops, downloads the result into pinned memory.
  void run_step(const Batch& batch, KVCache& cache, bool greedy);
  // Queues every op of the step; no allocation and no synchronising call (it may be captured into a graph).
  void record_step(const Batch& batch, bool greedy);
  // Attention of the step's T rows over S sequences; where the split-K decode kernel plugs in.
  void attend(float* out, const float* qkv, const cuda::AttentionRow* rows, const KVView* views, int T, int S);

  struct State;  // device weights, cuBLAS, buffers, graphs (cuda_model.cpp)
  std::unique_ptr<State> s_;
};

}  // namespace servelab
