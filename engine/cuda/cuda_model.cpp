// SPDX-License-Identifier: MIT
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
#include "cuda/graph.h"
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

// Most floats of attention score scratch (256 MB); longer steps run attention in several launches.
constexpr std::size_t kMaxScoreFloats = std::size_t{64} << 20;

// What a cache alone plans for, before any step is seen: prefill steps up to this many tokens
// (the scheduler's default max_num_batched_tokens) and this many sequences per step.
constexpr int kPlanTokens = 2048, kPlanSeqs = 256;

std::size_t align16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

/**
 * The sizes every buffer is allocated for. A step within the plan allocates
 * nothing; a larger one grows the plan once (and drops the CUDA Graphs, whose
 * pointers the new buffers invalidate).
 */
struct StepPlan {
  int tokens = 0;                 // token rows per step (T)
  int seqs = 0;                   // sequences per step (S <= T)
  int logit_rows = 0;             // rows that get logits (R <= T)
  int keys = 0;                   // keys a row may attend to: the largest cache's capacity
  std::size_t table_entries = 0;  // block-table entries of one step, all sequences together

  bool covers(const StepPlan& need) const {
    return need.tokens <= tokens && need.seqs <= seqs && need.logit_rows <= logit_rows && need.keys <= keys &&
           need.table_entries <= table_entries;
  }
  StepPlan max(const StepPlan& o) const {
    return {std::max(tokens, o.tokens), std::max(seqs, o.seqs), std::max(logit_rows, o.logit_rows),
            std::max(keys, o.keys), std::max(table_entries, o.table_entries)};
  }
};

/**
 * Where each per-step input lives inside the STEP device buffer (and its
 * pinned host twin): fixed offsets derived from the plan, not from the step,
 * so a captured graph's pointers stay valid for every later step.
 * @verbatim
 *  | ids [tokens] | rows [tokens] | views [layers][seqs] | logits rows [logit_rows] | tables [table_entries] |
 * @endverbatim
 */
struct StepLayout {
  std::size_t ids = 0, rows = 0, views = 0, logits_rows = 0, tables = 0, bytes = 0;
  StepLayout(const StepPlan& p, int layers) {
    rows = ids + align16(sizeof(std::int32_t) * p.tokens);
    views = rows + align16(sizeof(cuda::AttentionRow) * p.tokens);
    logits_rows = views + align16(sizeof(KVView) * static_cast<std::size_t>(layers) * p.seqs);
    tables = logits_rows + align16(sizeof(std::int32_t) * p.logit_rows);
    bytes = tables + align16(sizeof(std::int32_t) * p.table_entries);
  }
};

}  // namespace

struct CudaModel::State {
  ModelConfig config;
  Tensor embed_tokens;  // [vocab, hidden]
  Tensor norm;          // [hidden] f32
  Tensor lm_head;       // [vocab, hidden]; the same allocation as embed_tokens when tied
  Tensor inv_freq;      // [head_dim / 2] f32
  std::vector<DeviceLayer> layers;
  cuda::Gemm gemm;
  cuda::GraphCache graphs;
  bool use_graphs = true;
  bool poison = cuda::poison_requested();
  CudaStepStats stats;

  /// Device buffers, allocated for `plan` (see StepPlan).
  enum Buffer {
    X,         // [tokens, hidden] f32 residual stream
    IN,        // [tokens, max(hidden, intermediate)] the next GEMM's input, in the weights' dtype
    QKV,       // [tokens, q_dim + 2 kv_dim] f32
    ATTN,      // [tokens, q_dim] f32 attention output
    GATE_UP,   // [tokens, 2 intermediate] f32
    PROJ,      // [tokens, hidden] f32 o_proj / down_proj output
    SELECTED,  // [logit_rows, hidden] f32 rows that get logits
    LOGITS,    // [logit_rows, vocab] f32
    TOKENS,    // [logit_rows] int32 greedy choices
    SCORES,    // [rows per launch, heads, keys] attention_naive's S then P
    STEP,      // the step's inputs (StepLayout); last: never poisoned
    COUNT
  };
  Tensor buffers[COUNT];
  StepPlan plan;
  cuda::PinnedBuffer staging;  // [StepLayout bytes] host twin of STEP
  cuda::PinnedBuffer result;   // [logit_rows, vocab] f32 logits or [logit_rows] int32 tokens, copied back

  std::size_t score_floats() const {
    const std::size_t per_row = cuda::attention_scores_floats(1, config.num_attention_heads, plan.keys);
    return std::max(per_row, std::min(per_row * static_cast<std::size_t>(plan.tokens), kMaxScoreFloats));
  }

  /// Makes every buffer big enough for @p need; allocates only when the plan grows.
  void ensure(const StepPlan& need) {
    if (plan.covers(need)) return;
    plan = plan.max(need);
    graphs.clear();  // their pointers are about to dangle
    ++stats.plan_growths;
    const ModelConfig& c = config;
    const std::size_t T = static_cast<std::size_t>(plan.tokens), R = static_cast<std::size_t>(plan.logit_rows);
    const std::size_t H = c.hidden_size, F = c.intermediate_size, Q = c.q_dim(), KV = c.kv_dim();
    const std::size_t floats[COUNT] = {T * H,
                                       T * std::max(H, F),
                                       T * (Q + 2 * KV),
                                       T * Q,
                                       T * 2 * F,
                                       T * H,
                                       R * H,
                                       R * c.vocab_size,
                                       R,
                                       score_floats(),
                                       (StepLayout(plan, c.num_hidden_layers).bytes + 3) / 4};
    for (int b = 0; b < COUNT; ++b) {
      buffers[b] = Tensor{};  // free first: the old and new buffers need not fit together
      buffers[b] = cuda::device_empty(DType::F32, {static_cast<std::int64_t>(std::max<std::size_t>(floats[b], 1))});
    }
    gemm.reserve(T * std::max({H, F, Q}));
    staging.reserve(StepLayout(plan, c.num_hidden_layers).bytes);
    result.reserve(std::max(R * c.vocab_size * sizeof(float), std::size_t{16}));
  }

  float* buf(Buffer b) { return buffers[b].as<float>(); }
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
  auto cache = std::make_unique<CudaKVCache>(s_->config, num_blocks, block_size);
  // Size the step buffers for this cache now, so the steps that use it allocate nothing.
  const ModelConfig& c = s_->config;
  const long slots = static_cast<long>(num_blocks) * block_size;  // may exceed INT_MAX
  const int capacity = static_cast<int>(std::min<long>(slots, c.max_position_embeddings));
  const int tokens = static_cast<int>(std::min<long>(slots, kPlanTokens)),
            seqs = std::min({num_blocks, tokens, kPlanSeqs});
  const std::size_t blocks_per_seq = std::min<std::size_t>(num_blocks, (capacity + block_size - 1) / block_size);
  s_->ensure(StepPlan{tokens, seqs, seqs, capacity, blocks_per_seq * seqs});
  return cache;
}

void CudaModel::reserve(int max_tokens, int max_seqs) {
  check(max_tokens >= 1 && max_seqs >= 1 && max_seqs <= max_tokens, "CudaModel::reserve: need 1 <= max_seqs (",
        max_seqs, ") <= max_tokens (", max_tokens, ")");
  s_->ensure(StepPlan{max_tokens, max_seqs, max_seqs, s_->plan.keys, s_->plan.table_entries});
}

std::pair<std::size_t, std::size_t> CudaModel::memory_info() const { return cuda::memory_info(); }

const CudaStepStats& CudaModel::stats() const { return s_->stats; }

void CudaModel::set_graphs(bool on) {
  s_->use_graphs = on;
  if (!on) s_->graphs.clear();
}

std::vector<float> CudaModel::forward(const Batch& batch, KVCache& cache) {
  const int R = static_cast<int>(batch.logits_indices.size());
  run_step(batch, cache, false);
  std::vector<float> logits(static_cast<std::size_t>(R) * s_->config.vocab_size);
  std::memcpy(logits.data(), s_->result.data(), logits.size() * sizeof(float));  // pinned → caller's vector
  return logits;
}

std::vector<std::int32_t> CudaModel::forward_greedy(const Batch& batch, KVCache& cache) {
  const int R = static_cast<int>(batch.logits_indices.size());
  run_step(batch, cache, true);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(R));
  std::memcpy(tokens.data(), s_->result.data(), tokens.size() * sizeof(std::int32_t));
  return tokens;
}

void CudaModel::run_step(const Batch& batch, KVCache& cache, bool greedy) {
  check(cache.on_device(), "--backend cuda: the KV cache is in host memory; make it with Model::make_kv_cache()");
  State& s = *s_;
  const ModelConfig& c = s.config;
  const int T = batch.num_tokens(), L = c.num_hidden_layers, V = c.vocab_size;
  const int S = static_cast<int>(batch.seqs.size()), R = static_cast<int>(batch.logits_indices.size());
  std::size_t table_entries = 0;
  for (const SequenceChunk& seq : batch.seqs) table_entries += seq.block_table.size();
  const int capacity = static_cast<int>(
      std::min<long>(static_cast<long>(cache.num_blocks()) * cache.block_size(), c.max_position_embeddings));
  s.ensure(StepPlan{T, S, R, capacity, table_entries});  // allocates only when this step outgrows the plan

  // Host: the step's inputs, written into the pinned staging at the plan's fixed offsets.
  const StepLayout at(s.plan, L);
  std::byte* host = s.staging.data();
  std::byte* step = static_cast<std::byte*>(s.buffers[State::STEP].data);
  auto* ids = reinterpret_cast<std::int32_t*>(host + at.ids);                  // [T]
  auto* rows = reinterpret_cast<cuda::AttentionRow*>(host + at.rows);          // [T] each row's sequence and position
  auto* views = reinterpret_cast<KVView*>(host + at.views);                    // [L][S] device addresses inside
  auto* logits_rows = reinterpret_cast<std::int32_t*>(host + at.logits_rows);  // [R]
  auto* tables = reinterpret_cast<std::int32_t*>(host + at.tables);            // every block table, concatenated
  std::copy(batch.token_ids.begin(), batch.token_ids.end(), ids);
  std::copy(batch.logits_indices.begin(), batch.logits_indices.end(), logits_rows);
  std::size_t table_at = 0;
  for (int i = 0, row = 0; i < S; ++i) {
    const SequenceChunk& seq = batch.seqs[i];
    for (int j = 0; j < seq.num_new_tokens; ++j, ++row) rows[row] = {i, seq.num_computed_tokens + j};
    std::copy(seq.block_table.begin(), seq.block_table.end(), tables + table_at);
    // A paged view's table is read by the kernels: point it at the uploaded copy.
    const auto* device_table = reinterpret_cast<const std::int32_t*>(step + at.tables) + table_at;
    for (int l = 0; l < L; ++l) {
      KVView v = cache.view(l, seq.block_table);
      if (v.block_table != nullptr) v.block_table = device_table;
      views[static_cast<std::size_t>(l) * S + i] = v;
    }
    table_at += seq.block_table.size();
  }
  cuda::copy_to_device_async(step, host, at.tables + table_at * sizeof(std::int32_t));  // one upload
  if (s.poison)  // NaN everywhere, so an element no kernel writes shows up in the result
    for (int b = 0; b < State::STEP; ++b) cuda::fill_bytes_async(s.buffers[b].data, 0xFF, s.buffers[b].nbytes());

  const auto record = [&] { record_step(batch, greedy); };
  // Decode-shaped steps (one new token per sequence) repeat their shape step after step: replay a graph.
  if (s.use_graphs && T == S) {
    const std::uint64_t key = (static_cast<std::uint64_t>(T) << 33) | (static_cast<std::uint64_t>(R) << 1) | greedy;
    const long replays = s.graphs.replays();
    s.graphs.run(key, record);
    s.stats.graph_replays += s.graphs.replays() - replays;
  } else {
    record();
  }
  // The one download, then the one wait; it also reports a fault in any op of the step, even when R = 0.
  if (greedy)
    cuda::copy_to_host_async(s.result.data(), s.buf(State::TOKENS), sizeof(std::int32_t) * R);
  else
    cuda::copy_to_host_async(s.result.data(), s.buf(State::LOGITS), sizeof(float) * R * static_cast<std::size_t>(V));
  cuda::synchronize();
  ++s.stats.steps;
}

void CudaModel::record_step(const Batch& batch, bool greedy) {
  State& s = *s_;
  const ModelConfig& c = s.config;
  const int T = batch.num_tokens(), H = c.hidden_size, F = c.intermediate_size, L = c.num_hidden_layers;
  const int S = static_cast<int>(batch.seqs.size()), R = static_cast<int>(batch.logits_indices.size());
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const StepLayout at(s.plan, L);
  const std::byte* step = static_cast<const std::byte*>(s.buffers[State::STEP].data);
  const auto* ids = reinterpret_cast<const std::int32_t*>(step + at.ids);                  // [T]
  const auto* rows = reinterpret_cast<const cuda::AttentionRow*>(step + at.rows);          // [T]
  const auto* kv_views = reinterpret_cast<const KVView*>(step + at.views);                 // [L][S]
  const auto* logits_rows = reinterpret_cast<const std::int32_t*>(step + at.logits_rows);  // [R]
  float* x = s.buf(State::X);              // [T, hidden] residual stream
  void* in = s.buf(State::IN);             // [T, hidden or intermediate] next GEMM input, weights' dtype
  float* qkv = s.buf(State::QKV);          // [T, q_dim + 2 kv_dim]
  float* attn = s.buf(State::ATTN);        // [T, q_dim]
  float* gate_up = s.buf(State::GATE_UP);  // [T, 2 intermediate]
  float* proj = s.buf(State::PROJ);        // [T, hidden]
  const DType wd = s.layers.empty() ? s.lm_head.dtype : s.layers[0].o_proj.dtype;  // GEMM input dtype
  const cuda::AttentionHeads heads{c.num_attention_heads, c.num_key_value_heads, c.head_dim};

  cuda::embedding_lookup(x, s.embed_tokens, ids, T);
  if (L > 0) cuda::add_rmsnorm(x, nullptr, s.layers[0].input_layernorm.as<const float>(), in, wd, T, H, eps);
  for (int l = 0; l < L; ++l) {
    const DeviceLayer& w = s.layers[l];
    const KVView* layer_views = kv_views + static_cast<std::size_t>(l) * S;  // [S]
    // Attention sublayer: q, k and v from one GEMM, then bias + RoPE + KV write in one kernel.
    s.gemm.matmul_as_weight(qkv, in, w.qkv_proj, T);
    cuda::qkv_bias_rope_kv_write(qkv, c.attention_bias ? w.qkv_bias.as<const float>() : nullptr, rows, layer_views, T,
                                 heads, s.inv_freq.as<const float>());
    attend(attn, qkv, rows, layer_views, T, S);
    s.gemm.matmul(proj, attn, w.o_proj, T);
    // x += o_proj; the MLP's input norm, in the GEMM's dtype.
    cuda::add_rmsnorm(x, proj, w.post_attention_layernorm.as<const float>(), in, wd, T, H, eps);
    s.gemm.matmul_as_weight(gate_up, in, w.gate_up_proj, T);
    cuda::silu_mul_to(in, wd, gate_up, T, F);
    s.gemm.matmul_as_weight(proj, in, w.down_proj, T);
    // x += down_proj; the next layer's input norm (the last layer's residual is added alone).
    if (l + 1 < L)
      cuda::add_rmsnorm(x, proj, s.layers[l + 1].input_layernorm.as<const float>(), in, wd, T, H, eps);
    else
      cuda::add_inplace(x, proj, static_cast<std::size_t>(T) * H);
  }
  if (R == 0) return;
  // Final norm and LM head only on the rows that are sampled or scored.
  float* selected = s.buf(State::SELECTED);  // [R, hidden]
  float* logits = s.buf(State::LOGITS);      // [R, vocab]
  cuda::gather_rows(selected, x, logits_rows, R, H);
  cuda::add_rmsnorm(selected, nullptr, s.norm.as<const float>(), in, s.lm_head.dtype, R, H, eps);
  s.gemm.matmul_as_weight(logits, in, s.lm_head, R);
  if (greedy) cuda::argmax_rows(reinterpret_cast<std::int32_t*>(s.buf(State::TOKENS)), logits, R, c.vocab_size);
}

void CudaModel::attend(float* out, const float* qkv, const cuda::AttentionRow* rows, const KVView* views, int T,
                       int S) {
  State& s = *s_;
  const ModelConfig& c = s.config;
  const cuda::AttentionHeads heads{c.num_attention_heads, c.num_key_value_heads, c.head_dim};
  const std::size_t qkv_stride = static_cast<std::size_t>(c.q_dim()) + 2 * c.kv_dim();
  // Lab 05's kernels (attention_flash.h): flash attention for prefill, and
  // for a decode step (one query per sequence) split-K, each sequence's keys
  // split across blocks, a whole KV group per block, the partial softmax
  // states merged with online_softmax_merge. The plan's key capacity is
  // passed, not this step's longest context, so the arguments, and a
  // captured graph, do not change as contexts grow.
  cuda::attention(out, qkv, qkv_stride, rows, views, T, S, s.plan.keys, heads, s.buf(State::SCORES), s.score_floats());
}

}  // namespace servelab
