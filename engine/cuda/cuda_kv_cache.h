// SPDX-License-Identifier: MIT
/**
 * @file cuda_kv_cache.h
 * @brief KV blocks in device memory: what the CUDA backend's attention reads
 *        and its KV-write kernel fills.
 *
 * Same layout and bytes as HostKVCache (kv/kv_cache.h), on the GPU:
 * @verbatim
 *  per layer, k and v: [num_blocks, block_size, kv_dim]   f32
 * @endverbatim
 * key_blocks()/value_blocks() and the KVViews built from them hold device
 * addresses: kernels dereference them, host code only passes them on (in
 * CudaModel's per-step upload, which also moves the block tables to the
 * device). Make one with Model::make_kv_cache(), which picks this class when
 * the model runs on CUDA.
 */
#pragma once

#include "core/tensor.h"
#include "kv/kv_cache.h"

namespace servelab {

/// Per-layer K/V blocks in CUDA device memory.
class CudaKVCache final : public KVCache {
 public:
  /**
   * @brief Allocates the storage, zero-filled (NaN-filled when the
   *        SERVELAB_CUDA_POISON environment variable is 1, so a read of an
   *        unwritten row shows up in the results).
   * @throws Error when a size is not positive or the device is out of memory.
   */
  CudaKVCache(const ModelConfig& config, int num_blocks, int block_size);
  /// key_blocks() and value_blocks() are device pointers: never dereference them on the host.
  bool on_device() const override { return true; }

 protected:
  void copy_out(std::byte* dst, const float* src, std::size_t bytes) override;
  void copy_in(float* dst, const std::byte* src, std::size_t bytes) override;

 private:
  Tensor k_, v_;  // device [num_layers][num_blocks][block_size][kv_dim]
};

}  // namespace servelab
