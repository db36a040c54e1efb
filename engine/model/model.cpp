#include "model/model.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/cuda_runtime_probe.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "model/rope_freq.h"

namespace servelab {

Backend parse_backend(const std::string& text, const std::string& what) {
  if (text == "cpu") return Backend::CPU;
  if (text == "cuda") return Backend::CUDA;
  fail(what, ": unknown backend '", text, "' (expected cpu or cuda)");
}

Model::Model(ModelConfig config, ModelWeights weights, const EngineOptions& options)
    : config_(std::move(config)), weights_(std::move(weights)), options_(options) {
  if (options_.backend == Backend::CUDA) {
    // The seam is here; the CUDA implementation of the ops is the CUDA backend issue's.
    const std::string probe = cuda_device_summary();
    fail("--backend cuda: the CUDA backend is not implemented in this version of servelab (", probe,
         "); use --backend cpu");
  }
  pool_ = std::make_unique<ThreadPool>(options_.num_threads);
  ctx_ = KernelContext{pool_.get(), options_.deterministic};
  inv_freq_ = rope_inv_freq(config_);
}

std::unique_ptr<Model> Model::from_pretrained(const std::filesystem::path& dir, const EngineOptions& options) {
  ModelConfig config = load_config(dir / "config.json");
  config.name = dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
  ModelWeights weights = load_weights(config, dir, options.weight_dtype);
  return std::make_unique<Model>(std::move(config), std::move(weights), options);
}

std::unique_ptr<Model> Model::from_preset(const std::string& name, std::uint64_t seed, const EngineOptions& options) {
  ModelConfig config = preset(name);
  ThreadPool fill_pool(options.num_threads);
  ModelWeights weights = synthetic_weights(config, seed, fill_pool, options.weight_dtype);
  return std::make_unique<Model>(std::move(config), std::move(weights), options);
}

void Model::check_batch(const Batch& batch, const KVCache& cache) const {
  int rows = 0;
  for (const auto& s : batch.seqs) {
    check(s.kv_slot >= 0 && s.kv_slot < cache.num_slots(), "batch: kv_slot ", s.kv_slot, " out of range [0, ",
          cache.num_slots(), ")");
    check(s.num_new_tokens > 0 && s.num_computed_tokens >= 0, "batch: a sequence needs at least one new token");
    const int end = s.num_computed_tokens + s.num_new_tokens;
    check(end <= config_.max_position_embeddings, "sequence of ", end, " tokens exceeds max_position_embeddings (",
          config_.max_position_embeddings, ") of model ", config_.name);
    check(end <= cache.capacity(s.kv_slot), "KV cache slot ", s.kv_slot, " holds ", cache.capacity(s.kv_slot),
          " tokens but the sequence needs ", end);
    rows += s.num_new_tokens;
  }
  check(rows == batch.num_tokens(), "batch: sequences cover ", rows, " tokens but token_ids has ", batch.num_tokens());
  for (std::int32_t id : batch.token_ids)
    check(id >= 0 && id < config_.vocab_size, "token id ", id, " is outside the vocabulary [0, ", config_.vocab_size,
          ") of model ", config_.name);
  for (std::int32_t r : batch.logits_indices)
    check(r >= 0 && r < batch.num_tokens(), "batch: logits index ", r, " out of range");
}

std::vector<float> Model::forward(const Batch& batch, KVCache& cache) {
  check_batch(batch, cache);
  const ModelConfig& c = config_;
  const int T = batch.num_tokens(), H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);

  // Activations for this step; sized by T so a decode step stays small.
  std::vector<float> x(static_cast<std::size_t>(T) * H);   // [T, hidden] residual stream
  std::vector<float> xn(x.size());                         // [T, hidden] normalised input of a sublayer
  std::vector<float> q(static_cast<std::size_t>(T) * Q);   // [T, q_dim]
  std::vector<float> k(static_cast<std::size_t>(T) * KV);  // [T, kv_dim]
  std::vector<float> v(k.size());                          // [T, kv_dim]
  std::vector<float> attn(q.size());                       // [T, q_dim]
  std::vector<float> gate(static_cast<std::size_t>(T) * F), up(gate.size());  // [T, intermediate]
  std::vector<float> proj(x.size());                       // [T, hidden] output of o_proj / down_proj

  std::vector<int> positions(T);
  std::vector<AttentionSeq> seqs;
  int row = 0;
  for (const auto& s : batch.seqs) {
    seqs.push_back({row, s.num_new_tokens, s.num_computed_tokens, {}});
    for (int i = 0; i < s.num_new_tokens; ++i) positions[row + i] = s.num_computed_tokens + i;
    row += s.num_new_tokens;
  }

  embedding_lookup(weights_.embed_tokens, batch.token_ids, x.data());

  const AttentionShape shape{c.num_attention_heads, c.num_key_value_heads, c.head_dim};
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    // Attention sublayer.
    rmsnorm(ctx_, xn.data(), x.data(), w.input_layernorm.as<const float>(), T, H, eps);
    matmul(ctx_, q.data(), xn.data(), w.q_proj, T);
    matmul(ctx_, k.data(), xn.data(), w.k_proj, T);
    matmul(ctx_, v.data(), xn.data(), w.v_proj, T);
    if (c.attention_bias) {
      add_bias(q.data(), w.q_bias.as<const float>(), T, Q);
      add_bias(k.data(), w.k_bias.as<const float>(), T, KV);
      add_bias(v.data(), w.v_bias.as<const float>(), T, KV);
    }
    rope(ctx_, q.data(), positions.data(), T, c.num_attention_heads, c.head_dim, inv_freq_.data());
    rope(ctx_, k.data(), positions.data(), T, c.num_key_value_heads, c.head_dim, inv_freq_.data());
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].kv = cache.view(l, batch.seqs[i].kv_slot);
      for (int j = 0; j < seqs[i].num_new_tokens; ++j) {
        const std::size_t r = static_cast<std::size_t>(seqs[i].first_row + j) * KV;
        std::memcpy(seqs[i].kv.key(seqs[i].num_computed_tokens + j), &k[r], sizeof(float) * KV);
        std::memcpy(seqs[i].kv.value(seqs[i].num_computed_tokens + j), &v[r], sizeof(float) * KV);
      }
    }
    attention_naive(ctx_, attn.data(), q.data(), seqs, shape);
    matmul(ctx_, proj.data(), attn.data(), w.o_proj, T);
    add_inplace(x.data(), proj.data(), x.size());
    // MLP sublayer (SwiGLU).
    rmsnorm(ctx_, xn.data(), x.data(), w.post_attention_layernorm.as<const float>(), T, H, eps);
    matmul(ctx_, gate.data(), xn.data(), w.gate_proj, T);
    matmul(ctx_, up.data(), xn.data(), w.up_proj, T);
    silu_mul(ctx_, gate.data(), gate.data(), up.data(), gate.size());
    matmul(ctx_, proj.data(), gate.data(), w.down_proj, T);
    add_inplace(x.data(), proj.data(), x.size());
  }

  // Final norm and LM head only on the rows that are sampled or scored.
  const int R = static_cast<int>(batch.logits_indices.size());
  std::vector<float> selected(static_cast<std::size_t>(R) * H);
  for (int r = 0; r < R; ++r)
    std::memcpy(&selected[static_cast<std::size_t>(r) * H], &x[static_cast<std::size_t>(batch.logits_indices[r]) * H],
                sizeof(float) * H);
  rmsnorm(ctx_, selected.data(), selected.data(), weights_.norm.as<const float>(), R, H, eps);
  std::vector<float> logits(static_cast<std::size_t>(R) * c.vocab_size);
  if (R > 0) matmul(ctx_, logits.data(), selected.data(), weights_.lm_head, R);
  return logits;
}

}  // namespace servelab
