/**
 * @file cuda_kv_cache.h
 * @brief The contiguous KV cache in device memory: what the CUDA backend's
 *        attention reads and its KV-write kernel fills.
 *
 * Same layout and bytes as ContiguousKVCache (kv/kv_cache.h), on the GPU:
 * @verbatim
 *  k: [num_layers][num_slots][max_seq_len][kv_dim]   (same for v), f32
 * @endverbatim
 * view() returns KVViews whose k and v are device addresses: kernels
 * dereference them, host code only passes them on (to the device, in
 * CudaModel's per-step upload). Make one with Model::make_kv_cache(), which
 * picks this class when the model runs on CUDA.
 */
#pragma once

#include <vector>

#include "core/tensor.h"
#include "kv/kv_cache.h"

namespace servelab {

/// Contiguous per-slot K/V storage in CUDA device memory.
class CudaKVCache final : public KVCache {
 public:
  /**
   * @brief Allocates the storage, zero-filled (NaN-filled when the
   *        SERVELAB_CUDA_POISON environment variable is 1, so a read of an
   *        unwritten row shows up in the results).
   * @throws Error when a size is not positive or the device is out of memory.
   */
  CudaKVCache(const ModelConfig& config, int num_slots, int max_seq_len);
  /// @return device pointers; never dereference them on the host.
  KVView view(int layer, int slot) override;
  int num_slots() const override { return num_slots_; }
  int capacity(int) const override { return max_seq_len_; }
  std::size_t bytes_allocated() const override { return k_.nbytes() + v_.nbytes(); }

  /**
   * @brief Copies the first @p tokens K and V rows of (@p layer, @p slot) to the host (tests, debugging).
   * @param k [tokens, kv_dim] destination, @param v [tokens, kv_dim] destination.
   */
  void copy_to_host(int layer, int slot, int tokens, float* k, float* v) const;

 private:
  std::size_t offset(int layer, int slot) const;  // first float of (layer, slot); checks both

  int num_layers_, num_slots_, max_seq_len_;
  std::size_t kv_dim_;
  Tensor k_, v_;  // device [num_layers][num_slots][max_seq_len][kv_dim]
};

/// True when @p cache keeps its K/V in device memory (a CudaKVCache); false in a build without CUDA.
bool is_device_kv_cache(const KVCache& cache);

}  // namespace servelab
