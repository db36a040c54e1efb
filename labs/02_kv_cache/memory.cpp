// SPDX-License-Identifier: MIT
/**
 * @file memory.cpp
 * @brief Lab 02's memory tables: the KV memory formula for the published
 *        models and their MHA/GQA/MQA variants, and the formula checked
 *        against the bytes the engine's cache allocates (lab02.h).
 * @see labs/02_kv_cache/README.md
 */
#include <algorithm>
#include <string>
#include <utility>

#include "kv/kv_cache.h"
#include "lab02.h"
#include "perf/work.h"

namespace servelab::lab02 {

using namespace servelab::lab;

namespace {

// Preset with its published kv head count, or forced to MHA (kv = heads) or MQA (kv = 1).
ModelConfig variant(const std::string& name, const std::string& kind) {
  ModelConfig c = preset(name);
  if (kind == "MHA") c.num_key_value_heads = c.num_attention_heads;
  if (kind == "MQA") c.num_key_value_heads = 1;
  return c;
}

}  // namespace

// 3. KV memory: the formula for the published models and their MHA/GQA/MQA variants: what GQA saves, and the
//    prefill/decode article's 270 MB and 670 MB checked.
Table kv_memory_table() {
  Table memory{.name = "kv_memory",
               .title = "KV cache size: 2 × layers × kv_heads × head_dim × L × B × bytes",
               .columns = {"model", "attention", "kv heads", "per token (bf16)", "L=2048 B=1 bf16", "L=8192 B=16 bf16",
                           "L=2048 B=1 f32"}};
  for (const char* name : {"qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3-8b", "llama-3-70b"})
    for (const char* kind : {"MHA", "GQA", "MQA"}) {
      const ModelConfig v = variant(name, kind);
      memory.add_row(
          {std::string(name), std::string(v.attention_kind()), static_cast<long long>(v.num_key_value_heads),
           human_bytes(kv_cache_bytes(v, 1, 1, DType::BF16)), human_bytes(kv_cache_bytes(v, 2048, 1, DType::BF16)),
           human_bytes(kv_cache_bytes(v, 8192, 16, DType::BF16)), human_bytes(kv_cache_bytes(v, 2048, 1, DType::F32))});
    }
  memory.note =
      "The published models use GQA (Qwen2.5: 2 KV heads, Llama 3: 8). The prefill/decode article quotes "
      "Llama-3-8B at 2048 tokens ≈ 270 MB and 70B ≈ 670 MB: " +
      std::to_string(kv_cache_bytes(preset("llama-3-8b"), 2048, 1, DType::BF16)) + " and " +
      std::to_string(kv_cache_bytes(preset("llama-3-70b"), 2048, 1, DType::BF16)) + " bytes here.";
  return memory;
}

// 4. The formula against what the engine's cache really allocates (f32 cache, sizes this machine can hold):
//    the formula is the code. @p cases counts the cases checked.
Table kv_allocated_table(bool quick, int& cases) {
  Table measured{.name = "kv_allocated",
                 .title = "Formula vs bytes the engine's contiguous KV cache allocated (f32)",
                 .columns = {"model", "attention", "L", "B", "formula [bytes]", "allocated [bytes]", "equal"}};
  cases = 0;
  for (const char* name : {"tiny", "small", "qwen2.5-0.5b"})
    for (const char* kind : {"MHA", "GQA", "MQA"})
      for (auto [L, B] : {std::pair{128, 1}, {quick ? 256 : 1024, 4}}) {
        const ModelConfig v = variant(name, kind);
        const HostKVCache cache(v, B, L);  // contiguous: B sequences, one block of L tokens each
        const auto formula = kv_cache_bytes(v, L, B, DType::F32);
        measured.add_row({std::string(name), std::string(v.attention_kind()), static_cast<long long>(L),
                          static_cast<long long>(B), static_cast<long long>(formula),
                          static_cast<long long>(cache.bytes_allocated()),
                          std::string(formula == cache.bytes_allocated() ? "yes" : "no")});
        ++cases;
      }
  return measured;
}

namespace {

// Live activations of one step of @p tokens batched tokens with @p sampled rows through the LM head, in bf16 with
// f32 logits: a layer's residual stream and its normed copy (2h), q and attention output (2q), k and v (2kv), the
// MLP's gate and up and their SwiGLU product (3I). Layers run one after another, so one layer's buffers are live.
double activation_bytes(const ModelConfig& c, double tokens, double sampled) {
  const double per_token = 2.0 * c.hidden_size + 2.0 * c.q_dim() + 2.0 * c.kv_dim() + 3.0 * c.intermediate_size;
  return tokens * per_token * dtype_size(DType::BF16) + sampled * c.vocab_size * dtype_size(DType::F32);
}

}  // namespace

// 5. GPU memory = weights + KV + activations + runtime (the KV cache article, §2-6) on one 80 GB card.
Table gpu_memory_table(const Hardware& card) {
  const double kTokens = 8192, kSampled = 256, kRuntime = 2e9;  // vLLM's defaults for a step; runtime assumed
  Table t{.name = "gpu_memory",
          .title = "One " + card.name + " (" + plain_number(card.memory_gb) +
                   " GB): weights + activations + runtime, and the requests the KV room left holds (bf16)",
          .columns = {"model", Column{"weights [GB]", 1}, Column{"activations [GB]", 2}, Column{"runtime [GB]", 1},
                      Column{"left for KV [GB]", 1}, "KV per token", "requests of 2,048", "requests of 8,192"}};
  for (const std::string& name : preset_names()) {
    const ModelConfig c = preset(name);
    const double weights = static_cast<double>(c.num_parameters()) * dtype_size(DType::BF16),
                 activations = activation_bytes(c, kTokens, kSampled),
                 left = std::max(0.0, card.memory_gb * 1e9 - weights - activations - kRuntime);
    const double token = static_cast<double>(kv_bytes_per_token(c, DType::BF16));
    std::vector<Cell> row = {name, weights / 1e9, activations / 1e9, kRuntime / 1e9, left / 1e9, human_bytes(token)};
    for (int len : {2048, 8192})
      row.push_back(len <= c.max_position_embeddings ? Cell(static_cast<long long>(left / (token * len)))
                                                     : Cell(std::string("-")));
    t.add_row(row);
  }
  t.note =
      "Weights: every parameter in bf16 (ModelConfig::num_parameters()). Activations: one layer's live buffers "
      "for a step of 8,192 batched tokens and f32 logits for 256 sampled rows (vLLM's default budgets). "
      "Runtime: 2 GB assumed for the CUDA context, library workspaces and CUDA graphs (vLLM measures it by "
      "profiling). KV per token: kv_bytes_per_token() (config/model_config.h). '-': longer than the model's "
      "context.";
  return t;
}

}  // namespace servelab::lab02
