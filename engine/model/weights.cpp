// SPDX-License-Identifier: MIT
#include "model/weights.h"

#include <cmath>

#include "core/error.h"
#include "core/quant.h"
#include "core/hash.h"
#include "core/random.h"
#include "core/thread_pool.h"
#include "model/safetensors.h"

namespace servelab {

std::string layer_tensor_name(int layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

namespace {

// One decoder block's tensors: name suffix, shape, and where it goes.
struct Slot {
  const char* suffix;
  std::vector<std::int64_t> shape;
  Tensor LayerWeights::*member;
  bool is_bias;
};

std::vector<Slot> layer_slots(const ModelConfig& c) {
  const std::int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), f = c.intermediate_size;
  return {
      {"input_layernorm.weight", {h}, &LayerWeights::input_layernorm, false},
      {"self_attn.q_proj.weight", {q, h}, &LayerWeights::q_proj, false},
      {"self_attn.k_proj.weight", {kv, h}, &LayerWeights::k_proj, false},
      {"self_attn.v_proj.weight", {kv, h}, &LayerWeights::v_proj, false},
      {"self_attn.q_proj.bias", {q}, &LayerWeights::q_bias, true},
      {"self_attn.k_proj.bias", {kv}, &LayerWeights::k_bias, true},
      {"self_attn.v_proj.bias", {kv}, &LayerWeights::v_bias, true},
      {"self_attn.o_proj.weight", {h, q}, &LayerWeights::o_proj, false},
      {"post_attention_layernorm.weight", {h}, &LayerWeights::post_attention_layernorm, false},
      {"mlp.gate_proj.weight", {f, h}, &LayerWeights::gate_proj, false},
      {"mlp.up_proj.weight", {f, h}, &LayerWeights::up_proj, false},
      {"mlp.down_proj.weight", {h, f}, &LayerWeights::down_proj, false},
  };
}

// Fills a tensor with offset + uniform noise of standard deviation `stddev`, keyed by (seed, name, index).
Tensor synthetic(const std::string& name, std::vector<std::int64_t> shape, float offset, float stddev,
                 std::uint64_t seed, ThreadPool& pool) {
  Tensor t = Tensor::zeros(DType::F32, std::move(shape));
  float* out = t.as<float>();
  const std::uint64_t key = splitmix64(seed ^ fnv1a(name));
  const float half_width = stddev * std::sqrt(3.0f);  // uniform on [-a, a] has std a/sqrt(3)
  pool.parallel_for(static_cast<std::size_t>(t.numel()), [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const double u = unit_double(splitmix64(key + i));  // [0, 1), counter-based: no state from i - 1
      out[i] = offset + half_width * static_cast<float>(2.0 * u - 1.0);
    }
  });
  return t;
}

// A tensor the engine does not read usually means config.json describes a
// different computation (an o_proj or MLP bias, an extra norm) than the one
// the engine runs; dropping it silently gives tokens that differ from
// transformers'. Two kinds are safe to leave, as transformers does: a tied
// model's copy of the LM head, and old checkpoints' cached RoPE inv_freq.
void check_all_used(const Checkpoint& ckpt, const ModelConfig& c, const std::filesystem::path& dir) {
  std::vector<std::string> unused;
  for (const std::string& name : ckpt.unused()) {
    if (c.tie_word_embeddings && name == "lm_head.weight") continue;
    if (name.ends_with(".rotary_emb.inv_freq")) continue;
    unused.push_back(name);
  }
  if (unused.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < unused.size() && i < 5; ++i) list += (i ? ", '" : "'") + unused[i] + "'";
  if (unused.size() > 5) list += " and " + std::to_string(unused.size() - 5) + " more";
  fail(dir.string(), ": the checkpoint has ", unused.size(), " tensor", unused.size() == 1 ? "" : "s",
       " that servelab does not use (", list, "); config.json may ask for something the engine does not compute");
}

}  // namespace

ModelWeights load_weights(const ModelConfig& c, const std::filesystem::path& dir, DType weight_dtype) {
  Checkpoint ckpt(dir);
  const std::int64_t v = c.vocab_size, h = c.hidden_size;
  ModelWeights w;
  w.embed_tokens = ckpt.load("model.embed_tokens.weight", {v, h}, weight_dtype);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights lw;
    for (const Slot& s : layer_slots(c)) {
      if (s.is_bias && !c.attention_bias) continue;
      lw.*s.member =
          ckpt.load(layer_tensor_name(l, s.suffix), s.shape, s.shape.size() == 2 ? weight_dtype : DType::F32);
    }
    w.layers.push_back(std::move(lw));
  }
  w.norm = ckpt.load("model.norm.weight", {h});
  w.lm_head = c.tie_word_embeddings ? w.embed_tokens : ckpt.load("lm_head.weight", {v, h}, weight_dtype);
  check_all_used(ckpt, c, dir);
  return w;
}

void convert_matrices(ModelWeights& w, DType dtype, ThreadPool& pool) {
  auto to = [&](Tensor& t) {
    if (t.dtype != dtype) t = convert(t, dtype, pool);
  };
  const bool tied = w.lm_head.data == w.embed_tokens.data;
  to(w.embed_tokens);
  if (tied)
    w.lm_head = w.embed_tokens;
  else
    to(w.lm_head);
  for (LayerWeights& l : w.layers)
    for (Tensor* m : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) to(*m);
}

ModelWeights synthetic_weights(const ModelConfig& c, std::uint64_t seed, ThreadPool& pool, DType weight_dtype) {
  check(weight_dtype != DType::F16, "synthetic weights can be f32, bf16, q8_0, q4_0 or q4_1, not f16");
  const std::int64_t v = c.vocab_size, h = c.hidden_size;
  auto matrix = [&](const std::string& name, std::vector<std::int64_t> shape) {
    const float stddev = 1.0f / std::sqrt(static_cast<float>(shape.back()));
    Tensor t = synthetic(name, std::move(shape), 0.0f, stddev, seed, pool);
    return weight_dtype == DType::F32 ? t : convert(t, weight_dtype, pool);
  };
  ModelWeights w;
  w.embed_tokens = matrix("model.embed_tokens.weight", {v, h});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights lw;
    for (const Slot& s : layer_slots(c)) {
      if (s.is_bias && !c.attention_bias) continue;
      const std::string name = layer_tensor_name(l, s.suffix);
      if (s.shape.size() == 2)
        lw.*s.member = matrix(name, s.shape);
      else  // norm weights near 1, biases near 0
        lw.*s.member = synthetic(name, s.shape, s.is_bias ? 0.0f : 1.0f, 0.02f, seed, pool);
    }
    w.layers.push_back(std::move(lw));
  }
  w.norm = synthetic("model.norm.weight", {h}, 1.0f, 0.02f, seed, pool);
  w.lm_head = c.tie_word_embeddings ? w.embed_tokens : matrix("lm_head.weight", {v, h});
  return w;
}

}  // namespace servelab
