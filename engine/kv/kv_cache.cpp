#include "kv/kv_cache.h"

#include "core/error.h"

namespace servelab {

ContiguousKVCache::ContiguousKVCache(const ModelConfig& config, int num_slots, int max_seq_len)
    : num_slots_(num_slots), max_seq_len_(max_seq_len), kv_dim_(static_cast<std::size_t>(config.kv_dim())) {
  check(num_slots > 0 && max_seq_len > 0, "KV cache: num_slots and max_seq_len must be positive, got ", num_slots,
        " and ", max_seq_len);
  const std::size_t n = static_cast<std::size_t>(config.num_hidden_layers) * num_slots * max_seq_len * kv_dim_;
  k_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
}

KVView ContiguousKVCache::view(int layer, int slot) {
  check(slot >= 0 && slot < num_slots_, "KV cache: slot ", slot, " out of range [0, ", num_slots_, ")");
  const std::size_t offset = (static_cast<std::size_t>(layer) * num_slots_ + slot) * max_seq_len_ * kv_dim_;
  return KVView{k_.data() + offset, v_.data() + offset, kv_dim_, nullptr, 0};
}

}  // namespace servelab
