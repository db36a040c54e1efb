#include "perf/work.h"

namespace servelab {

double kv_projection_flops(const ModelConfig& c, std::int64_t new_tokens) {
  return 2.0 * static_cast<double>(new_tokens) * c.hidden_size * 2.0 * c.kv_dim() * c.num_hidden_layers;
}

double attention_flops(const ModelConfig& c, std::int64_t cached_tokens, std::int64_t new_tokens) {
  // Query at position p reads p + 1 keys: sum over p = c .. c+n-1 of (p + 1) = n*c + n(n+1)/2.
  const double n = static_cast<double>(new_tokens), cached = static_cast<double>(cached_tokens);
  const double keys_read = n * cached + n * (n + 1.0) / 2.0;
  return 2.0 * 2.0 * keys_read * c.q_dim() * c.num_hidden_layers;
}

std::uint64_t kv_cache_bytes(const ModelConfig& c, std::int64_t context_len, std::int64_t batch, DType dtype) {
  return 2ull * static_cast<std::uint64_t>(c.num_hidden_layers) * static_cast<std::uint64_t>(c.num_key_value_heads) *
         static_cast<std::uint64_t>(c.head_dim) * static_cast<std::uint64_t>(context_len) *
         static_cast<std::uint64_t>(batch) * dtype_size(dtype);
}

std::uint64_t decode_weight_bytes(const ModelConfig& c, DType weight_dtype) {
  const std::uint64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), f = c.intermediate_size;
  const std::uint64_t matrices = h * q + 2 * h * kv + q * h + 3 * h * f;
  const std::uint64_t small = 2 * h + (c.attention_bias ? q + 2 * kv : 0);  // norms and biases, f32
  return c.num_hidden_layers * (matrices * dtype_size(weight_dtype) + small * 4) +
         static_cast<std::uint64_t>(c.vocab_size) * h * dtype_size(weight_dtype) + h * 4;
}

}  // namespace servelab
