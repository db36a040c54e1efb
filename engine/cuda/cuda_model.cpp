#include "cuda/cuda_model.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "core/error.h"
#include "cuda/attention_flash.h"
#include "cuda/cuda_kv_cache.h"
#include "cuda/device_memory.h"
#include "cuda/device_probe.h"
#include "cuda/gemm.h"
#include "cuda/ops.h"

namespace servelab {

namespace {

// Tensors stacked along their outermost dimension into one new device tensor.
Tensor stack_on_device(const std::vector<const Tensor*>& parts) {
  std::vector<std::int64_t> shape = parts[0]->shape;
  shape[0] = 0;
  for (const Tensor* p : parts) shape[0] += p->shape[0];
  Tensor out = cuda::device_empty(parts[0]->dtype, shape);
  std::size_t at = 0;
  for (const Tensor* p : parts) {
    check(p->dtype == out.dtype, "CudaModel: stacked weights differ in dtype");
    cuda::copy_to_device(static_cast<std::byte*>(out.data) + at, p->data, p->nbytes());
    at += p->nbytes();
  }
  return out;
}

// Appends @p values to @p staging at a 16-byte boundary and returns their byte offset.
template <typename T>
std::size_t pack(std::vector<std::byte>& staging, const std::vector<T>& values) {
  const std::size_t at = (staging.size() + 15) / 16 * 16;
  staging.resize(at + values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(staging.data() + at, values.data(), values.size() * sizeof(T));
  return at;
}

// One decoder block's weights in device memory.
struct DeviceLayer {
  Tensor input_layernorm;           // [hidden] f32
  Tensor qkv_proj;                  // [q_dim + 2 kv_dim, hidden]: q_proj, k_proj, v_proj stacked
  Tensor qkv_bias;                  // [q_dim + 2 kv_dim] f32; empty without attention_bias
  Tensor o_proj;                    // [hidden, q_dim]
  Tensor post_attention_layernorm;  // [hidden] f32
  Tensor gate_up_proj;              // [2 intermediate, hidden]: gate_proj, up_proj stacked
  Tensor down_proj;                 // [hidden, intermediate]
};

// Most floats of attention score scratch per step (256 MB); longer steps run in several launches.
constexpr std::size_t kMaxScoreFloats = std::size_t{64} << 20;

}  // namespace

struct CudaModel::State {
  ModelConfig config;
  Tensor embed_tokens;  // [vocab, hidden]
  Tensor norm;          // [hidden] f32
  Tensor lm_head;       // [vocab, hidden]; the same allocation as embed_tokens when tied
  Tensor inv_freq;      // [head_dim / 2] f32
  std::vector<DeviceLayer> layers;
  cuda::Gemm gemm;
  bool poison = cuda::poison_requested();

  /// Device activation buffers, reused across steps; each grows to the largest step seen.
  enum Buffer { X, XN, QKV, ATTN, GATE_UP, ACT, PROJ, SELECTED, LOGITS, SCORES, STEP, COUNT };  // STEP last: not poisoned
  Tensor buffers[COUNT];
  std::vector<std::byte> staging;  // host side of the STEP buffer

  /// Buffer @p which with room for at least @p floats 4-byte elements.
  float* get(Buffer which, std::size_t floats) {
    Tensor& b = buffers[which];
    if (b.empty() || static_cast<std::size_t>(b.numel()) < floats)
      b = cuda::device_empty(DType::F32, {static_cast<std::int64_t>(std::max<std::size_t>(floats, 1))});
    return b.as<float>();
  }
};

CudaModel::CudaModel(const ModelConfig& config, const ModelWeights& weights, const std::vector<float>& inv_freq)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.config = config;
  s.embed_tokens = cuda::to_device(weights.embed_tokens);
  s.lm_head = weights.lm_head.data == weights.embed_tokens.data ? s.embed_tokens : cuda::to_device(weights.lm_head);
  s.norm = cuda::to_device(weights.norm);
  s.inv_freq = cuda::upload(inv_freq);
  for (const LayerWeights& w : weights.layers) {
    DeviceLayer d;
    d.input_layernorm = cuda::to_device(w.input_layernorm);
    d.qkv_proj = stack_on_device({&w.q_proj, &w.k_proj, &w.v_proj});
    if (config.attention_bias) d.qkv_bias = stack_on_device({&w.q_bias, &w.k_bias, &w.v_bias});
    d.o_proj = cuda::to_device(w.o_proj);
    d.post_attention_layernorm = cuda::to_device(w.post_attention_layernorm);
    d.gate_up_proj = stack_on_device({&w.gate_proj, &w.up_proj});
    d.down_proj = cuda::to_device(w.down_proj);
    s.layers.push_back(std::move(d));
  }
}

CudaModel::~CudaModel() = default;

std::unique_ptr<ModelBackend> make_cuda_backend(const ModelConfig& config, const ModelWeights& weights,
                                                const std::vector<float>& inv_freq) {
  check(cuda_device_count() > 0, "--backend cuda: no usable CUDA device (", cuda_device_summary(),
        "); use --backend cpu");
  return std::make_unique<CudaModel>(config, weights, inv_freq);
}

std::unique_ptr<KVCache> CudaModel::make_kv_cache(int num_blocks, int block_size) const {
  return std::make_unique<CudaKVCache>(s_->config, num_blocks, block_size);
}

std::pair<std::size_t, std::size_t> CudaModel::memory_info() const { return cuda::memory_info(); }

std::vector<float> CudaModel::forward(const Batch& batch, KVCache& cache) {
  check(cache.on_device(), "--backend cuda: the KV cache is in host memory; make it with Model::make_kv_cache()");
  State& s = *s_;
  const ModelConfig& c = s.config;
  const int T = batch.num_tokens(), H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size;
  const int QKV = Q + 2 * KV, L = c.num_hidden_layers, V = c.vocab_size;
  const int S = static_cast<int>(batch.seqs.size()), R = static_cast<int>(batch.logits_indices.size());
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const auto rows_of = [](int rows, int width) { return static_cast<std::size_t>(rows) * width; };

  // Host: what the kernels need to know about the batch, packed for one upload.
  std::vector<int> positions(T);                  // [T] RoPE positions
  std::vector<cuda::AttentionRow> attn_rows(T);   // [T] each row's sequence and position
  std::vector<KVView> views(static_cast<std::size_t>(L) * S);  // [layer][seq] device addresses, not dereferenced here
  std::vector<std::int32_t> tables;       // every sequence's block table, concatenated
  std::vector<std::size_t> table_at(S);   // [S] where sequence i's table starts in tables
  int max_keys = 0, row = 0;
  for (int i = 0; i < S; ++i) {
    const SequenceChunk& seq = batch.seqs[i];
    for (int j = 0; j < seq.num_new_tokens; ++j, ++row) {
      positions[row] = seq.num_computed_tokens + j;
      attn_rows[row] = {i, seq.num_computed_tokens + j};
    }
    max_keys = std::max(max_keys, seq.num_computed_tokens + seq.num_new_tokens);
    for (int l = 0; l < L; ++l) views[static_cast<std::size_t>(l) * S + i] = cache.view(l, seq.block_table);
    table_at[i] = tables.size();
    tables.insert(tables.end(), seq.block_table.begin(), seq.block_table.end());
  }
  s.staging.clear();
  const std::size_t at_ids = pack(s.staging, batch.token_ids), at_pos = pack(s.staging, positions),
                    at_rows = pack(s.staging, attn_rows), at_tables = pack(s.staging, tables),
                    at_views = pack(s.staging, views), at_logits = pack(s.staging, batch.logits_indices);
  auto* step = reinterpret_cast<std::byte*>(s.get(State::STEP, (s.staging.size() + 3) / 4));
  // A paged view's table is read by the kernels: point it at the uploaded copy, then restage the views.
  for (int l = 0; l < L; ++l)
    for (int i = 0; i < S; ++i) {
      KVView& v = views[static_cast<std::size_t>(l) * S + i];
      if (v.block_table != nullptr)
        v.block_table = reinterpret_cast<const std::int32_t*>(step + at_tables) + table_at[static_cast<std::size_t>(i)];
    }
  std::memcpy(s.staging.data() + at_views, views.data(), views.size() * sizeof(KVView));
  cuda::copy_to_device(step, s.staging.data(), s.staging.size());
  const auto* ids = reinterpret_cast<const std::int32_t*>(step + at_ids);             // [T]
  const auto* pos = reinterpret_cast<const int*>(step + at_pos);                      // [T]
  const auto* rows = reinterpret_cast<const cuda::AttentionRow*>(step + at_rows);     // [T]
  const auto* kv_views = reinterpret_cast<const KVView*>(step + at_views);            // [L][S]
  const auto* logits_rows = reinterpret_cast<const std::int32_t*>(step + at_logits);  // [R]

  float* x = s.get(State::X, rows_of(T, H));                // [T, hidden] residual stream
  float* xn = s.get(State::XN, rows_of(T, H));              // [T, hidden] sublayer input
  float* qkv = s.get(State::QKV, rows_of(T, QKV));          // [T, q_dim + 2 kv_dim]
  float* attn = s.get(State::ATTN, rows_of(T, Q));          // [T, q_dim]
  float* gate_up = s.get(State::GATE_UP, rows_of(T, 2 * F));  // [T, 2 intermediate]
  float* act = s.get(State::ACT, rows_of(T, F));            // [T, intermediate]
  float* proj = s.get(State::PROJ, rows_of(T, H));          // [T, hidden] o_proj / down_proj out
  const std::size_t score_floats = std::max(cuda::attention_scores_floats(1, c.num_attention_heads, max_keys),
                                            std::min(cuda::attention_scores_floats(T, c.num_attention_heads, max_keys),
                                                     kMaxScoreFloats));
  float* scores = s.get(State::SCORES, score_floats);  // [rows per launch, heads, max_keys] S, then P
  float* selected = s.get(State::SELECTED, rows_of(R, H));     // [R, hidden] rows that get logits
  float* device_logits = s.get(State::LOGITS, rows_of(R, V));  // [R, vocab]
  if (s.poison)  // NaN everywhere, so an element no kernel writes shows up in the logits
    for (int b = 0; b < State::STEP; ++b) cuda::fill_bytes(s.buffers[b].data, 0xFF, s.buffers[b].nbytes());

  cuda::embedding_lookup(x, s.embed_tokens, ids, T);
  const cuda::AttentionHeads heads{c.num_attention_heads, c.num_key_value_heads, c.head_dim};
  for (int l = 0; l < L; ++l) {
    const DeviceLayer& w = s.layers[l];
    const KVView* layer_views = kv_views + static_cast<std::size_t>(l) * S;  // [S]
    // Attention sublayer: q, k and v from one GEMM over the stacked weights.
    cuda::rmsnorm(xn, x, w.input_layernorm.as<const float>(), T, H, eps);
    s.gemm.matmul(qkv, xn, w.qkv_proj, T);
    if (c.attention_bias) cuda::add_bias(qkv, w.qkv_bias.as<const float>(), T, QKV);
    // In a qkv row the k heads follow the q heads, so one launch rotates both.
    cuda::rope(qkv, QKV, pos, T, c.num_attention_heads + c.num_key_value_heads, c.head_dim, s.inv_freq.as<const float>());
    cuda::kv_cache_write(qkv, QKV, Q, Q + KV, rows, layer_views, T, KV);
    cuda::attention(attn, qkv, QKV, rows, layer_views, T, S, max_keys, heads, scores, score_floats);  // lab 05: flash / split-K
    s.gemm.matmul(proj, attn, w.o_proj, T);
    cuda::add_inplace(x, proj, rows_of(T, H));
    // MLP sublayer (SwiGLU): gate and up from one GEMM, then down.
    cuda::rmsnorm(xn, x, w.post_attention_layernorm.as<const float>(), T, H, eps);
    s.gemm.matmul(gate_up, xn, w.gate_up_proj, T);
    cuda::silu_mul(act, gate_up, T, F);
    s.gemm.matmul(proj, act, w.down_proj, T);
    cuda::add_inplace(x, proj, rows_of(T, H));
  }

  // Final norm and LM head only on the rows that are sampled or scored.
  std::vector<float> logits(rows_of(R, V));
  if (R == 0) return logits;
  cuda::gather_rows(selected, x, logits_rows, R, H);
  cuda::rmsnorm(selected, selected, s.norm.as<const float>(), R, H, eps);
  s.gemm.matmul(device_logits, selected, s.lm_head, R);
  cuda::copy_to_host(logits.data(), device_logits, logits.size() * sizeof(float));  // waits for every op above
  return logits;
}

}  // namespace servelab
