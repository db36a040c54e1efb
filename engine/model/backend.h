// SPDX-License-Identifier: MIT
/**
 * @file backend.h
 * @brief The seam between Model and a device backend: Model runs its steps
 *        through this interface, so model/ never includes a cuda/ header and
 *        dependencies point one way (cuda → model).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "config/model_config.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/weights.h"

namespace servelab {

/// A place other than the host CPU that runs the model's steps.
class ModelBackend {
 public:
  virtual ~ModelBackend() = default;
  /**
   * @brief One step over a ragged batch; the contract of Model::forward(),
   *        which has already checked @p batch against @p cache.
   * @return [batch.logits_indices.size(), vocab_size] logits, row-major, on the host.
   */
  virtual std::vector<float> forward(const Batch& batch, KVCache& cache) = 0;
  /**
   * @brief The step of forward(), returning each logits row's argmax
   *        (Model::forward_greedy()); a backend overrides it to pick on the
   *        device and copy back token ids only.
   * @return [batch.logits_indices.size()] token ids.
   */
  virtual std::vector<std::int32_t> forward_greedy(const Batch& batch, KVCache& cache) = 0;
  /**
   * @brief Sizes the backend's step buffers for steps of up to @p max_tokens
   *        tokens over @p max_seqs sequences, so no step within them allocates.
   *        The default has nothing to size.
   */
  virtual void reserve(int max_tokens, int max_seqs) {
    (void)max_tokens;
    (void)max_seqs;
  }
  /// KV storage of @p num_blocks blocks of @p block_size tokens in the memory this backend reads.
  virtual std::unique_ptr<KVCache> make_kv_cache(int num_blocks, int block_size) const = 0;
  /// Bytes of device memory: [0] free now, [1] total.
  virtual std::pair<std::size_t, std::size_t> memory_info() const = 0;
};

/**
 * @brief The CUDA backend (cuda/cuda_model.h): checks that a device exists and
 *        uploads the weights once.
 * @param weights  host weights; read, not kept.
 * @param inv_freq [head_dim / 2] RoPE inverse frequencies.
 * @throws Error saying why when the build has no CUDA or the machine no
 *         device, or naming the CUDA call that failed.
 */
std::unique_ptr<ModelBackend> make_cuda_backend(const ModelConfig& config, const ModelWeights& weights,
                                                const std::vector<float>& inv_freq);

}  // namespace servelab
