// SPDX-License-Identifier: MIT
#include "model/model.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

#include "core/error.h"
#include "core/huge_pages.h"
#include "core/quant.h"
#include "kernels/attention.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "model/gguf.h"
#include "model/rope_freq.h"
#include "model/safetensors.h"
#include "model/sampler.h"
#include "perf/work.h"

namespace servelab {

Backend parse_backend(const std::string& text, const std::string& what) {
  if (text == "cpu") return Backend::CPU;
  if (text == "cuda") return Backend::CUDA;
  fail(what, ": unknown backend '", text, "' (expected cpu or cuda)");
}

void apply_dtype_flag(const std::string& text, const std::string& what, ModelOptions& options) {
  // "-math": the weights' own arithmetic (bf16 or int8 dot products), for every type that has one.
  static const std::map<std::string, DType> kWeights{{"f32", DType::F32},   {"bf16", DType::BF16},
                                                     {"q8_0", DType::Q8_0}, {"q4_0", DType::Q4_0},
                                                     {"q4_1", DType::Q4_1}, {"gguf", DType::F32}};
  const bool math = text.ends_with("-math");
  const std::string base = math ? text.substr(0, text.size() - 5) : text;
  const auto it = kWeights.find(base);
  check(it != kWeights.end() && !(math && base == "f32"), what, ": unsupported dtype '", text,
        "' (expected f32, bf16, q8_0, q4_0, q4_1 or gguf, the last five also with -math: bf16-math, q8_0-math, ...)");
  options.weight_dtype = it->second;
  // gguf-math: each tensor in its own type's arithmetic, bf16 dot products for BF16 tensors (as llama.cpp does
  // for a BF16 file: it rounds the inputs to bf16 too) and int8 ones for quantized blocks; f32 tensors stay f32.
  options.bf16_activations = math && (base == "bf16" || base == "gguf");
  options.int8_activations = math && base != "bf16";
  options.gguf_types = base == "gguf";
}

Model::Model(ModelConfig config, ModelWeights weights, const ModelOptions& options)
    : config_(std::move(config)), weights_(std::move(weights)), options_(options) {
  pool_ = std::make_unique<ThreadPool>(options_.num_threads);
  ctx_ = KernelContext{.pool = pool_.get(),
                       .deterministic = options_.deterministic,
                       .bf16_activations = options_.bf16_activations,
                       .int8_activations = options_.int8_activations};
  inv_freq_ = rope_inv_freq(config_);
  embed_dtype_ = weights_.embed_tokens.dtype;
  matrix_dtype_ = weights_.layers.empty() ? embed_dtype_ : weights_.layers[0].o_proj.dtype;
  if (options_.backend == Backend::CUDA) {
    for (DType d : {embed_dtype_, matrix_dtype_})
      check(!dtype_is_quantized(d), "--backend cuda runs f32 or bf16 weights; ", dtype_name(d),
            " weights run on the CPU (--backend cpu)");
    // The GPU stacks q/k/v and gate/up in device memory itself. The host copy
    // is released once uploaded (a 1.5B model in f32 is 6 GB of host memory,
    // or a file mapping held open); the device copy is the only one.
    device_ = make_cuda_backend(config_, weights_, inv_freq_);
    weights_ = ModelWeights{};
    return;
  }
  // The file pages of the weights stacked or converted below stay resident after the load read
  // them, yet are never read again: for SmolLM2-135M from an f32 GGUF, the q/k/v and gate/up
  // sources are 280 MB of the process's resident memory. They are handed back layer by layer, so
  // the sources and their stacked copies are never all resident at once (the load's peak).
  // live_after(n): the tensors the model still reads once the first n layers are stacked.
  auto live_after = [&](std::size_t n) {
    std::vector<const Tensor*> live{&weights_.embed_tokens, &weights_.norm, &weights_.lm_head};
    for (std::size_t i = 0; i < weights_.layers.size(); ++i) {
      const LayerWeights& w = weights_.layers[i];
      for (const Tensor* t : {&w.input_layernorm, &w.o_proj, &w.post_attention_layernorm, &w.down_proj})
        live.push_back(t);
      if (i >= n)
        for (const Tensor* t :
             {&w.q_proj, &w.k_proj, &w.v_proj, &w.q_bias, &w.k_bias, &w.v_bias, &w.gate_proj, &w.up_proj})
          live.push_back(t);
    }
    for (const FusedLayer& f : fused_)
      for (const Tensor* t : {&f.qkv_proj, &f.qkv_bias, &f.gate_up_proj}) live.push_back(t);
    return live;
  };
  // Stack q/k/v and gate/up so each sublayer input is multiplied once (one
  // pass of threads, one larger GEMM), and make the per-projection tensors
  // views into the stacks so no weight is held twice.
  for (LayerWeights& w : weights_.layers) {
    // A GGUF may store the projections of one stack in different types; such a stack is computed in f32.
    for (auto stack : {std::vector<Tensor*>{&w.q_proj, &w.k_proj, &w.v_proj}, {&w.gate_proj, &w.up_proj}})
      if (std::any_of(stack.begin(), stack.end(), [&](const Tensor* t) { return t->dtype != stack[0]->dtype; }))
        for (Tensor* t : stack) *t = convert(*t, DType::F32, *pool_);
    FusedLayer f;
    f.qkv_proj = concat_rows({&w.q_proj, &w.k_proj, &w.v_proj});
    if (config_.attention_bias) f.qkv_bias = concat_rows({&w.q_bias, &w.k_bias, &w.v_bias});
    f.gate_up_proj = concat_rows({&w.gate_proj, &w.up_proj});
    view_into_stacks(w, f);
    fused_.push_back(std::move(f));
    release_unused_mapped_pages(live_after(fused_.size()));
  }
  if (options_.huge_pages) place_weights_in_huge_pages();
}

void Model::view_into_stacks(LayerWeights& w, const FusedLayer& f) {
  const std::int64_t q = w.q_proj.shape[0], kv = w.k_proj.shape[0], inter = w.gate_proj.shape[0];
  w.q_proj = f.qkv_proj.rows(0, q);
  w.k_proj = f.qkv_proj.rows(q, q + kv);
  w.v_proj = f.qkv_proj.rows(q + kv, q + 2 * kv);
  if (!f.qkv_bias.empty()) {
    w.q_bias = f.qkv_bias.rows(0, q);
    w.k_bias = f.qkv_bias.rows(q, q + kv);
    w.v_bias = f.qkv_bias.rows(q + kv, q + 2 * kv);
  }
  w.gate_proj = f.gate_up_proj.rows(0, inter);
  w.up_proj = f.gate_up_proj.rows(inter, 2 * inter);
}

void Model::place_weights_in_huge_pages() {
  const bool tied = weights_.lm_head.data == weights_.embed_tokens.data;
  std::vector<Tensor*> order;  // what a step reads, in its order
  for (std::size_t l = 0; l < fused_.size(); ++l) {
    LayerWeights& w = weights_.layers[l];
    FusedLayer& f = fused_[l];
    for (Tensor* t : {&w.input_layernorm, &f.qkv_proj, &f.qkv_bias, &w.o_proj, &w.post_attention_layernorm,
                      &f.gate_up_proj, &w.down_proj})
      order.push_back(t);
  }
  const std::size_t per_layer = fused_.empty() ? 0 : order.size() / fused_.size();
  order.push_back(&weights_.norm);
  order.push_back(&weights_.lm_head);
  if (!tied) order.push_back(&weights_.embed_tokens);
  const auto slot = [](const Tensor& t) { return (t.nbytes() + 63) / 64 * 64; };  // 64-byte aligned rows
  std::size_t total = 0;
  for (const Tensor* t : order) total += t->empty() ? 0 : slot(*t);
  if (total == 0) return;
  const std::shared_ptr<std::byte> region = allocate_huge_pages(total);
  placed_bytes_ = total;
  constexpr std::size_t kSliceBytes = std::size_t{16} << 20;
  std::size_t used = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    Tensor& t = *order[i];
    // A file mapping's pages are dropped once no tensor still to be copied lies on them, and a large tensor
    // (the LM head) is copied a slice of rows at a time, so the load never holds two copies of much.
    std::vector<const Tensor*> unplaced(order.begin() + static_cast<std::ptrdiff_t>(i) + 1, order.end());
    if (!t.empty()) {
      const std::int64_t rows = t.shape.empty() ? 1 : t.shape[0];
      const std::size_t row_bytes = t.nbytes() / static_cast<std::size_t>(rows);
      const std::int64_t slice = std::max<std::int64_t>(1, static_cast<std::int64_t>(kSliceBytes / row_bytes));
      for (std::int64_t r0 = 0; r0 < rows; r0 += slice) {
        const std::int64_t r1 = std::min(rows, r0 + slice);
        std::memcpy(region.get() + used + static_cast<std::size_t>(r0) * row_bytes,
                    static_cast<const std::byte*>(t.data) + static_cast<std::size_t>(r0) * row_bytes,
                    static_cast<std::size_t>(r1 - r0) * row_bytes);
        if (r1 == rows) break;
        const Tensor rest = t.rows(r1, rows);
        unplaced.push_back(&rest);
        release_unused_mapped_pages(unplaced);
        unplaced.pop_back();
      }
      Tensor placed = t;
      placed.data = region.get() + used;
      placed.owner = region;
      used += slot(t);
      t = std::move(placed);
    }
    // A layer's last tensor copied: its views move to the copies, so nothing holds the sources any more.
    if (per_layer > 0 && i < fused_.size() * per_layer && i % per_layer == per_layer - 1)
      view_into_stacks(weights_.layers[i / per_layer], fused_[i / per_layer]);
    release_unused_mapped_pages(unplaced);
  }
  if (tied) weights_.embed_tokens = weights_.lm_head;
}

Model::WeightPlacement Model::weight_placement() const {
  if (placed_bytes_ == 0) return {};
  // smaps counts per mapping, and the kernel may merge the region with a neighbour advised the same way.
  return {placed_bytes_, std::min(placed_bytes_, huge_page_bytes(weights_.lm_head.data))};
}

Model::~Model() = default;

std::unique_ptr<KVCache> Model::make_kv_cache(int num_blocks, int block_size) const {
  if (device_) return device_->make_kv_cache(num_blocks, block_size);
  return std::make_unique<HostKVCache>(config_, num_blocks, block_size);
}

std::size_t Model::device_kv_memory(double gpu_memory_utilization) const {
  check(device_ != nullptr, "--gpu-memory-utilization applies to --backend cuda; on the CPU give --kv-cache-memory");
  check(gpu_memory_utilization > 0.0 && gpu_memory_utilization <= 1.0,
        "--gpu-memory-utilization must be in (0, 1], got ", gpu_memory_utilization);
  const auto [free, total] = device_->memory_info();
  const double in_use = static_cast<double>(total - free);
  const double budget = gpu_memory_utilization * static_cast<double>(total) - in_use;
  check(budget > 0, "--gpu-memory-utilization ", gpu_memory_utilization, " leaves no memory for the KV cache (",
        in_use / 1e9, " GB of ", static_cast<double>(total) / 1e9, " GB already in use)");
  return static_cast<std::size_t>(budget);
}

float* Model::Workspace::get(Buffer which, std::size_t floats) {
  auto& b = buffers[which];
  if (b.size() < floats) b.resize(floats);
  return b.data();
}

std::unique_ptr<Model> Model::from_pretrained(const std::filesystem::path& dir, const ModelOptions& options) {
  if (is_gguf_path(dir)) {
    const GgufFile file(dir);
    ModelConfig config = gguf_config(file.contents(), dir.string());
    ThreadPool fill_pool(options.num_threads);
    ModelWeights weights = gguf_weights(file, config, options.weight_dtype, fill_pool, options.gguf_types);
    return std::make_unique<Model>(std::move(config), std::move(weights), options);
  }
  ModelConfig config = load_config(dir / "config.json");
  config.name = dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
  if (!dtype_is_quantized(options.weight_dtype))
    return std::make_unique<Model>(config, load_weights(config, dir, options.weight_dtype), options);
  ModelWeights weights = load_weights(config, dir, DType::F32);  // then quantized, as llama.cpp's quantize tool does
  ThreadPool fill_pool(options.num_threads);
  convert_matrices(weights, options.weight_dtype, fill_pool);
  return std::make_unique<Model>(std::move(config), std::move(weights), options);
}

std::unique_ptr<Model> Model::from_preset(const std::string& name, std::uint64_t seed, const ModelOptions& options) {
  ModelConfig config = preset(name);
  ThreadPool fill_pool(options.num_threads);
  ModelWeights weights = synthetic_weights(config, seed, fill_pool, options.weight_dtype);
  return std::make_unique<Model>(std::move(config), std::move(weights), options);
}

void Model::check_batch(const Batch& batch, const KVCache* cache) const {
  // A host cache's rows cannot be read by a kernel, nor a device cache's by the CPU.
  if (cache)
    check(cache->on_device() == (device_ != nullptr), "the KV cache is in ", cache->on_device() ? "device" : "host",
          " memory but the model runs on --backend ", device_ ? "cuda" : "cpu",
          "; make the cache with Model::make_kv_cache()");
  int rows = 0;
  for (const auto& s : batch.seqs) {
    check(s.num_new_tokens > 0 && s.num_computed_tokens >= 0, "batch: a sequence needs at least one new token");
    const int end = s.num_computed_tokens + s.num_new_tokens;
    check(end <= config_.max_position_embeddings, "sequence of ", end, " tokens exceeds max_position_embeddings (",
          config_.max_position_embeddings, ") of model ", config_.name);
    rows += s.num_new_tokens;
    if (!cache) {
      check(s.num_computed_tokens == 0, "batch: a step without a KV cache has no cached tokens, but a sequence has ",
            s.num_computed_tokens);
      continue;
    }
    const long capacity = static_cast<long>(s.block_table.size()) * cache->block_size();
    check(end <= capacity, "batch: a block table of ", s.block_table.size(), " blocks of ", cache->block_size(),
          " tokens holds ", capacity, " tokens but the sequence needs ", end);
    for (std::int32_t b : s.block_table)
      check(b >= 0 && b < cache->num_blocks(), "batch: block ", b, " out of range [0, ", cache->num_blocks(), ")");
  }
  check(rows == batch.num_tokens(), "batch: sequences cover ", rows, " tokens but token_ids has ", batch.num_tokens());
  for (std::int32_t id : batch.token_ids)
    check(id >= 0 && id < config_.vocab_size, "token id ", id, " is outside the vocabulary [0, ", config_.vocab_size,
          ") of model ", config_.name);
  for (std::int32_t r : batch.logits_indices)
    check(r >= 0 && r < batch.num_tokens(), "batch: logits index ", r, " out of range");
}

namespace {

// Work of x [M, K] · Wᵀ with f32 activations. [[maybe_unused]]: in a starter tree count_step is lab 03's
// region, stubbed, and nothing else calls it (clang's -Wunused-function).
[[maybe_unused]] Work gemm_count(int M, std::int64_t N, std::int64_t K, DType weights) {
  Work w = gemm_work(M, N, K, weights, DType::F32);
  // A quantized weight is a fraction of a byte, which gemm_work's whole bytes per element cannot say.
  if (dtype_is_quantized(weights)) w.weight_bytes = static_cast<double>(N) * K * dtype_bytes_per_element(weights);
  return w;
}

}  // namespace

void Model::count_step(const Batch& batch) {
  if (!counter_.enabled()) return;
  // BEGIN LAB03 SOLUTION: Model::count_step, the work of every op of a step from the batch's shapes
  const ModelConfig& c = config_;
  const double T = batch.num_tokens(), H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size;
  const double QKV = Q + 2 * KV, R = static_cast<double>(batch.logits_indices.size());
  const double fb = sizeof(float);  // activations, KV cache, norm weights and biases are f32
  const auto rmsnorm_work = [&](double rows) {
    return Work{.flops = 4 * rows * H, .weight_bytes = H * fb, .act_read = rows * H * fb, .act_written = rows * H * fb};
  };
  const Work residual{.flops = T * H, .act_read = 2 * T * H * fb, .act_written = T * H * fb};
  counter_.add("embedding", Work{.weight_bytes = T * H * dtype_size(embed_dtype_), .act_written = T * H * fb});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    counter_.add("rmsnorm", rmsnorm_work(T));
    counter_.add("qkv_proj", gemm_count(batch.num_tokens(), c.q_dim() + 2 * c.kv_dim(), c.hidden_size, matrix_dtype_));
    if (c.attention_bias)
      counter_.add(
          "bias",
          Work{.flops = T * QKV, .weight_bytes = QKV * fb, .act_read = T * QKV * fb, .act_written = T * QKV * fb});
    counter_.add("qkv_split", Work{.act_read = T * QKV * fb, .act_written = T * QKV * fb});
    counter_.add("rope",
                 Work{.flops = 3 * T * (Q + KV), .act_read = T * (Q + KV) * fb, .act_written = T * (Q + KV) * fb});
    counter_.add("kv_write", Work{.act_read = 2 * T * KV * fb, .kv_written = 2 * T * KV * fb});
    for (const SequenceChunk& s : batch.seqs) {
      const double n = s.num_new_tokens, cached = s.num_computed_tokens;
      const double keys = n * cached + n * (n + 1) / 2;  // query at position p reads p + 1 keys
      counter_.add("attention", Work{.flops = 4 * keys * Q,
                                     .act_read = n * Q * fb,
                                     .act_written = n * Q * fb,
                                     .kv_read = (cached + n) * 2 * KV * fb});
    }
    counter_.add("o_proj", gemm_count(batch.num_tokens(), c.hidden_size, c.q_dim(), matrix_dtype_));
    counter_.add("residual", residual);
    counter_.add("rmsnorm", rmsnorm_work(T));
    counter_.add("gate_up_proj", gemm_count(batch.num_tokens(), 2 * c.intermediate_size, c.hidden_size, matrix_dtype_));
    counter_.add("silu_mul", Work{.flops = 5 * T * F, .act_read = 2 * T * F * fb, .act_written = T * F * fb});
    counter_.add("down_proj", gemm_count(batch.num_tokens(), c.hidden_size, c.intermediate_size, matrix_dtype_));
    counter_.add("residual", residual);
  }
  counter_.add("final_norm", rmsnorm_work(R));
  counter_.add("lm_head", gemm_count(static_cast<int>(R), c.vocab_size, c.hidden_size, embed_dtype_));
  // END LAB03 SOLUTION
}

namespace {

// The greedy choice of each of the @p logits' rows of @p vocab_size (servelab::argmax), the rows spread
// over @p pool: a 16-row decode step of the small preset spent ~190 us in this loop on one thread while
// the others waited for the next step.
std::vector<std::int32_t> argmax_rows(std::span<const float> logits, int vocab_size, ThreadPool& pool) {
  const auto V = static_cast<std::size_t>(vocab_size);
  std::vector<std::int32_t> tokens(logits.size() / V);
  pool.parallel_for(tokens.size(), [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) tokens[r] = argmax(logits.subspan(r * V, V));
  });
  return tokens;
}

}  // namespace

void Model::device_step_done() const {
  if (layer_hook_)
    for (int l = 0; l < config_.num_hidden_layers; ++l) layer_hook_(l);
}

std::pair<std::unique_ptr<KVCache>, Batch> Model::scratch_cache(const Batch& batch) const {
  int longest = 1;
  for (const SequenceChunk& s : batch.seqs) longest = std::max(longest, s.num_new_tokens);
  std::pair<std::unique_ptr<KVCache>, Batch> out{make_kv_cache(static_cast<int>(batch.seqs.size()), longest), batch};
  for (std::size_t i = 0; i < out.second.seqs.size(); ++i) out.second.seqs[i].block_table = {static_cast<int>(i)};
  return out;
}

std::vector<std::int32_t> Model::forward_greedy(const Batch& batch, KVCache& cache) {
  if (!device_) return argmax_rows(forward(batch, cache), config_.vocab_size, *pool_);
  check_batch(batch, &cache);
  count_step(batch);
  std::vector<std::int32_t> tokens = device_->forward_greedy(batch, cache);  // argmax on the device: 4 bytes per row
  device_step_done();
  return tokens;
}

std::vector<std::int32_t> Model::forward_greedy(const Batch& batch) {
  if (!device_) return argmax_rows(forward(batch), config_.vocab_size, *pool_);
  check_batch(batch, nullptr);
  count_step(batch);
  auto [cache, pointed] = scratch_cache(batch);
  std::vector<std::int32_t> tokens = device_->forward_greedy(pointed, *cache);
  device_step_done();
  return tokens;
}

std::vector<float> Model::forward(const Batch& batch, KVCache& cache) {
  check_batch(batch, &cache);
  // Counted from the batch's shape before the dispatch, so the CPU and the GPU count the same step.
  count_step(batch);
  if (!device_) return forward_cpu(batch, &cache);
  std::vector<float> logits = device_->forward(batch, cache);  // the same step on the GPU (engine/cuda/cuda_model.h)
  device_step_done();
  return logits;
}

std::vector<float> Model::forward(const Batch& batch) {
  check_batch(batch, nullptr);
  count_step(batch);
  if (!device_) return forward_cpu(batch, nullptr);
  auto [cache, pointed] = scratch_cache(batch);
  std::vector<float> logits = device_->forward(pointed, *cache);
  device_step_done();
  return logits;
}

std::vector<float> Model::forward_cpu(const Batch& batch, KVCache* cache) {
  const ModelConfig& c = config_;
  const int T = batch.num_tokens(), H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);

  // Activations live in the model's workspace: they grow to the largest batch
  // seen and are reused, so a step allocates (and page-faults) nothing.
  const int QKV = Q + 2 * KV;
  float* x = ws_.get(Workspace::X, static_cast<std::size_t>(T) * H);                  // [T, hidden] residual stream
  float* xn = ws_.get(Workspace::XN, static_cast<std::size_t>(T) * H);                // [T, hidden] sublayer input
  float* qkv = ws_.get(Workspace::QKV, static_cast<std::size_t>(T) * QKV);            // [T, q_dim + 2 kv_dim]
  float* q = ws_.get(Workspace::Q, static_cast<std::size_t>(T) * Q);                  // [T, q_dim]
  float* k = ws_.get(Workspace::K, static_cast<std::size_t>(T) * KV);                 // [T, kv_dim]
  float* v = ws_.get(Workspace::V, static_cast<std::size_t>(T) * KV);                 // [T, kv_dim]
  float* attn = ws_.get(Workspace::ATTN, static_cast<std::size_t>(T) * Q);            // [T, q_dim]
  float* gate_up = ws_.get(Workspace::GATE_UP, static_cast<std::size_t>(T) * 2 * F);  // [T, 2 intermediate]
  float* act = ws_.get(Workspace::ACT, static_cast<std::size_t>(T) * F);              // [T, intermediate]
  float* proj = ws_.get(Workspace::PROJ, static_cast<std::size_t>(T) * H);  // [T, hidden] o_proj / down_proj out

  std::vector<int> positions(T);   // [T] RoPE position of each token row
  std::vector<AttentionSeq> seqs;  // [batch.seqs.size()] each sequence's rows, cached tokens and (below) KV view
  // Lab 01, no cache: every sequence is all new, from position 0.
  if (!cache) {
    for (std::size_t i = 0, first = 0; i < batch.seqs.size(); first += batch.seqs[i++].num_new_tokens) {
      const int n = batch.seqs[i].num_new_tokens;
      seqs.push_back({static_cast<int>(first), n, 0, {}});
      std::iota(positions.begin() + static_cast<std::ptrdiff_t>(first), positions.begin() + first + n, 0);
    }
  } else {
    // BEGIN LAB02 SOLUTION: Model::forward, where each sequence's new tokens sit: rows, positions, cached tokens
    int row = 0;
    for (const auto& s : batch.seqs) {
      seqs.push_back({row, s.num_new_tokens, s.num_computed_tokens, {}});
      for (int i = 0; i < s.num_new_tokens; ++i) positions[row + i] = s.num_computed_tokens + i;
      row += s.num_new_tokens;
    }
    // END LAB02 SOLUTION
  }

  embedding_lookup(weights_.embed_tokens, batch.token_ids, x);

  const AttentionShape shape{c.num_attention_heads, c.num_key_value_heads, c.head_dim};
  const std::size_t residual = static_cast<std::size_t>(T) * H;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    const FusedLayer& f = fused_[l];
    // Attention sublayer: q, k and v come out of one GEMM over the stacked weights.
    rmsnorm(ctx_, xn, x, w.input_layernorm.as<const float>(), T, H, eps);
    matmul(ctx_, qkv, xn, f.qkv_proj, T);
    if (c.attention_bias) add_bias(qkv, f.qkv_bias.as<const float>(), T, QKV);
    for (int t = 0; t < T; ++t) {
      const float* stacked = qkv + static_cast<std::size_t>(t) * QKV;
      std::memcpy(q + static_cast<std::size_t>(t) * Q, stacked, sizeof(float) * Q);
      std::memcpy(k + static_cast<std::size_t>(t) * KV, stacked + Q, sizeof(float) * KV);
      std::memcpy(v + static_cast<std::size_t>(t) * KV, stacked + Q + KV, sizeof(float) * KV);
    }
    rope(ctx_, q, positions.data(), T, c.num_attention_heads, c.head_dim, inv_freq_.data());
    rope(ctx_, k, positions.data(), T, c.num_key_value_heads, c.head_dim, inv_freq_.data());
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      if (!cache) {  // attention reads this step's own rows: sequence i's are contiguous from its first row
        const std::size_t at = static_cast<std::size_t>(seqs[i].first_row) * KV;
        seqs[i].kv = KVView{k + at, v + at, static_cast<std::size_t>(KV), nullptr, 0};
        continue;
      }
      seqs[i].kv = cache->view(l, batch.seqs[i].block_table);
      // BEGIN LAB02 SOLUTION: Model::forward writes each new token's K and V rows into the cache
      for (int j = 0; j < seqs[i].num_new_tokens; ++j) {
        const std::size_t r = static_cast<std::size_t>(seqs[i].first_row + j) * KV;
        std::memcpy(seqs[i].kv.key(seqs[i].num_computed_tokens + j), k + r, sizeof(float) * KV);
        std::memcpy(seqs[i].kv.value(seqs[i].num_computed_tokens + j), v + r, sizeof(float) * KV);
      }
      // END LAB02 SOLUTION
    }
    if (layer_hook_) layer_hook_(l);  // this layer's KV is final: it may leave now
    attention(ctx_, options_.attention, attn, q, seqs, shape);
    matmul(ctx_, proj, attn, w.o_proj, T);
    add_inplace(x, proj, residual);
    // MLP sublayer (SwiGLU): gate and up from one GEMM, then down.
    rmsnorm(ctx_, xn, x, w.post_attention_layernorm.as<const float>(), T, H, eps);
    matmul(ctx_, gate_up, xn, f.gate_up_proj, T);
    silu_mul(ctx_, act, gate_up, T, F);
    matmul(ctx_, proj, act, w.down_proj, T);
    add_inplace(x, proj, residual);
  }

  // Final norm and LM head only on the rows that are sampled or scored.
  const int R = static_cast<int>(batch.logits_indices.size());
  std::vector<float> selected(static_cast<std::size_t>(R) * H);
  for (int r = 0; r < R; ++r)
    std::memcpy(&selected[static_cast<std::size_t>(r) * H], x + static_cast<std::size_t>(batch.logits_indices[r]) * H,
                sizeof(float) * H);
  rmsnorm(ctx_, selected.data(), selected.data(), weights_.norm.as<const float>(), R, H, eps);
  std::vector<float> logits(static_cast<std::size_t>(R) * c.vocab_size);
  if (R > 0) matmul(ctx_, logits.data(), selected.data(), weights_.lm_head, R);
  return logits;
}

}  // namespace servelab
