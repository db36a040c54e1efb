// SPDX-License-Identifier: MIT
#include "cuda/cuda_kv_cache.h"

#include "core/error.h"
#include "cuda/device_memory.h"

namespace servelab {

CudaKVCache::CudaKVCache(const ModelConfig& config, int num_blocks, int block_size)
    : KVCache(config, num_blocks, block_size) {
  const std::vector<std::int64_t> shape = {num_layers(), num_blocks, block_size, static_cast<std::int64_t>(kv_dim())};
  k_ = cuda::device_empty(DType::F32, shape);
  v_ = cuda::device_empty(DType::F32, shape);
  const int byte = cuda::poison_requested() ? 0xFF : 0;  // 0xFFFFFFFF is a NaN
  cuda::fill_bytes(k_.data, byte, k_.nbytes());
  cuda::fill_bytes(v_.data, byte, v_.nbytes());
  set_storage(k_.as<float>(), v_.as<float>());
}

void CudaKVCache::copy_out(std::byte* dst, const float* src, std::size_t bytes) { cuda::copy_to_host(dst, src, bytes); }

void CudaKVCache::copy_in(float* dst, const std::byte* src, std::size_t bytes) {
  cuda::copy_to_device(dst, src, bytes);
}

}  // namespace servelab
