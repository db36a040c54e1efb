// SPDX-License-Identifier: MIT
#include "perf/work.h"

namespace servelab {

double kv_projection_flops(const ModelConfig& c, std::int64_t new_tokens) {
  return 2.0 * static_cast<double>(new_tokens) * c.hidden_size * 2.0 * c.kv_dim() * c.num_hidden_layers;
}

double attention_flops(const ModelConfig& c, std::int64_t cached_tokens, std::int64_t new_tokens) {
  // BEGIN LAB02 SOLUTION: attention_flops (the query at position p reads p + 1 keys)
  // Query at position p reads p + 1 keys: sum over p = c .. c+n-1 of (p + 1) = n*c + n(n+1)/2.
  const double n = static_cast<double>(new_tokens), cached = static_cast<double>(cached_tokens);
  const double keys_read = n * cached + n * (n + 1.0) / 2.0;
  return 2.0 * 2.0 * keys_read * c.q_dim() * c.num_hidden_layers;
  // END LAB02 SOLUTION
}

std::uint64_t kv_cache_bytes(const ModelConfig& c, std::int64_t context_len, std::int64_t batch, DType dtype) {
  // BEGIN LAB02 SOLUTION: kv_cache_bytes (2 x layers x KV heads x head_dim x tokens x sequences x bytes per element)
  return 2ull * static_cast<std::uint64_t>(c.num_hidden_layers) * static_cast<std::uint64_t>(c.num_key_value_heads) *
         static_cast<std::uint64_t>(c.head_dim) * static_cast<std::uint64_t>(context_len) *
         static_cast<std::uint64_t>(batch) * dtype_size(dtype);
  // END LAB02 SOLUTION
}

std::uint64_t decode_weight_bytes(const ModelConfig& c, DType weight_dtype) {
  // BEGIN LAB03 SOLUTION: decode_weight_bytes (every layer matrix, the norms and biases, the LM head, the final norm)
  const std::uint64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), f = c.intermediate_size;
  const std::uint64_t matrices = h * q + 2 * h * kv + q * h + 3 * h * f;
  const std::uint64_t small = 2 * h + (c.attention_bias ? q + 2 * kv : 0);  // norms and biases, f32
  return c.num_hidden_layers * (matrices * dtype_size(weight_dtype) + small * 4) +
         static_cast<std::uint64_t>(c.vocab_size) * h * dtype_size(weight_dtype) + h * 4;
  // END LAB03 SOLUTION
}

Work gemm_work(std::int64_t M, std::int64_t N, std::int64_t K, DType weights, DType activations) {
  Work w;
  // BEGIN LAB03 SOLUTION: gemm_work (FLOPs and bytes of out[M, N] = x[M, K] W[N, K]^T)
  w.flops = 2.0 * M * N * K;
  w.weight_bytes = static_cast<double>(N) * K * dtype_size(weights);
  w.act_read = static_cast<double>(M) * K * dtype_size(activations);
  w.act_written = static_cast<double>(M) * N * dtype_size(activations);
  // END LAB03 SOLUTION
  return w;
}

Work step_work(const ModelConfig& c, const StepDtypes& d, const std::vector<SeqShape>& seqs, std::int64_t logits_rows) {
  const double L = c.num_hidden_layers, H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size,
               V = c.vocab_size, R = static_cast<double>(logits_rows);
  const double wb = dtype_bytes_per_element(d.weights), ab = static_cast<double>(dtype_size(d.activations));
  double T = 0, keys_read = 0, kv_rows_read = 0;
  for (const SeqShape& s : seqs) {
    const double n = static_cast<double>(s.fresh), cached = static_cast<double>(s.cached);
    T += n;
    keys_read += n * cached + n * (n + 1.0) / 2.0;  // query at position p reads p + 1 keys
    kv_rows_read += cached + n;                     // every K/V row of the sequence, once per layer
  }
  const double QKV = Q + 2 * KV;
  // Matrices of one layer, in elements: qkv, o, gate+up, down.
  const double layer_weights = H * QKV + Q * H + 2 * F * H + F * H;
  Work w;
  // FLOPs: the GEMMs, attention (QK and PV), then the element-wise ops per element:
  // rmsnorm 4, bias 1, rope 3, residual add 1, silu·mul 5.
  w.flops = L * 2 * T * layer_weights + 2 * R * V * H + L * 4 * keys_read * Q +
            L * (2 * 4 * T * H + (c.attention_bias ? T * QKV : 0) + 3 * T * (Q + KV) + 2 * T * H + 5 * T * F) +
            4 * R * H;
  // Weights: every layer matrix once, the LM head once, the T embedding rows, norms and biases (f32).
  w.weight_bytes =
      L * layer_weights * wb + V * H * wb + T * H * wb + (L * 2 * H + H) * 4 + (c.attention_bias ? L * QKV * 4 : 0);
  // Activations read and written, op by op:
  //   GEMM inputs/outputs; the two rmsnorms; bias; q/k/v split; rope; attention's q and output;
  //   the K/V rows copied into the cache; two residual adds; silu·mul; final norm and LM head.
  w.act_read = L * ab * (T * H + T * Q + T * H + T * F) + R * H * ab +  // GEMM inputs
               L * ab *
                   (2 * T * H + (c.attention_bias ? T * QKV : 0) + T * QKV + T * (Q + KV) + T * Q + 2 * T * KV +
                    2 * 2 * T * H + 2 * T * F) +
               R * H * ab;  // final norm
  w.act_written =
      L * ab * (T * QKV + T * H + 2 * T * F + T * H) + R * V * ab +  // GEMM outputs
      T * H * ab +                                                   // embedding
      L * ab * (2 * T * H + (c.attention_bias ? T * QKV : 0) + T * QKV + T * (Q + KV) + T * Q + 2 * T * H + T * F) +
      R * H * ab;                                                            // final norm
  const double kv_token = static_cast<double>(kv_bytes_per_token(c, d.kv));  // all layers, K and V
  w.kv_read = kv_rows_read * kv_token;
  w.kv_written = T * kv_token;
  return w;
}

}  // namespace servelab
