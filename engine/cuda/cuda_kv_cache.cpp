#include "cuda/cuda_kv_cache.h"

#include "core/error.h"
#include "cuda/device_memory.h"

namespace servelab {

CudaKVCache::CudaKVCache(const ModelConfig& config, int num_slots, int max_seq_len)
    : num_layers_(config.num_hidden_layers),
      num_slots_(num_slots),
      max_seq_len_(max_seq_len),
      kv_dim_(static_cast<std::size_t>(config.kv_dim())) {
  check(num_slots > 0 && max_seq_len > 0, "KV cache: num_slots and max_seq_len must be positive, got ", num_slots,
        " and ", max_seq_len);
  const std::vector<std::int64_t> shape = {num_layers_, num_slots_, max_seq_len_, static_cast<std::int64_t>(kv_dim_)};
  k_ = cuda::device_empty(DType::F32, shape);
  v_ = cuda::device_empty(DType::F32, shape);
  const int byte = cuda::poison_requested() ? 0xFF : 0;  // 0xFFFFFFFF is a NaN
  cuda::fill_bytes(k_.data, byte, k_.nbytes());
  cuda::fill_bytes(v_.data, byte, v_.nbytes());
}

std::size_t CudaKVCache::offset(int layer, int slot) const {
  check(slot >= 0 && slot < num_slots_, "KV cache: slot ", slot, " out of range [0, ", num_slots_, ")");
  check(layer >= 0 && layer < num_layers_, "KV cache: layer ", layer, " out of range [0, ", num_layers_, ")");
  return (static_cast<std::size_t>(layer) * num_slots_ + slot) * max_seq_len_ * kv_dim_;
}

KVView CudaKVCache::view(int layer, int slot) {
  const std::size_t at = offset(layer, slot);
  return KVView{k_.as<float>() + at, v_.as<float>() + at, kv_dim_, nullptr, 0};
}

void CudaKVCache::copy_to_host(int layer, int slot, int tokens, float* k, float* v) const {
  check(tokens >= 0 && tokens <= max_seq_len_, "KV cache: ", tokens, " tokens outside the slot's ", max_seq_len_);
  const std::size_t at = offset(layer, slot), bytes = static_cast<std::size_t>(tokens) * kv_dim_ * sizeof(float);
  cuda::copy_to_host(k, k_.as<const float>() + at, bytes);
  cuda::copy_to_host(v, v_.as<const float>() + at, bytes);
}

bool is_device_kv_cache(const KVCache& cache) { return dynamic_cast<const CudaKVCache*>(&cache) != nullptr; }

}  // namespace servelab
