// SPDX-License-Identifier: MIT
/**
 * @file model_config.h
 * @brief Model shape and hyper-parameters: read from a Hugging Face
 *        config.json or taken from a named preset.
 *
 * One struct covers the Llama/Qwen2 family. Multi-head, grouped-query and
 * multi-query attention are the same model with a different
 * `num_key_value_heads` (= heads, a divisor of heads, or 1).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"

namespace servelab {

/// Which Hugging Face architecture the checkpoint uses (they differ in tensor names and biases only).
enum class Arch { Qwen2, Llama };

/// Name as in config.json's `architectures` field ("Qwen2ForCausalLM", "LlamaForCausalLM").
const char* arch_name(Arch arch);

/// RoPE frequency scaling, as in config.json's `rope_scaling` (or `rope_parameters`).
struct RopeScaling {
  std::string rope_type = "default";  ///< "default" (none) or "llama3"
  double factor = 1.0;                ///< llama3: how much the context was extended
  double low_freq_factor = 1.0;       ///< llama3: wavelengths above original/low are divided by factor
  double high_freq_factor = 4.0;      ///< llama3: wavelengths below original/high are kept
  std::int64_t original_max_position_embeddings = 8192;  ///< llama3: context length before scaling
};

/// Shape and hyper-parameters of a decoder-only Llama/Qwen2 model.
struct ModelConfig {
  std::string name;                  ///< preset name or the checkpoint folder it was read from
  Arch arch = Arch::Qwen2;           ///< architecture family
  int hidden_size = 0;               ///< d_model
  int num_hidden_layers = 0;         ///< decoder blocks
  int num_attention_heads = 0;       ///< query heads
  int num_key_value_heads = 0;       ///< K/V heads (MHA: = heads, GQA: divisor, MQA: 1)
  int head_dim = 0;                  ///< per-head width; hidden_size / heads unless config.json says otherwise
  int intermediate_size = 0;         ///< SwiGLU hidden width
  int vocab_size = 0;                ///< rows of the embedding and of the LM head
  int max_position_embeddings = 0;   ///< longest sequence (prompt + generated tokens)
  double rope_theta = 10000.0;       ///< RoPE base
  RopeScaling rope_scaling;          ///< RoPE frequency scaling
  double rms_norm_eps = 1e-6;        ///< RMSNorm epsilon
  bool tie_word_embeddings = false;  ///< LM head shares the embedding matrix
  bool attention_bias = false;       ///< q/k/v projections have a bias (always true for Qwen2)
  DType torch_dtype = DType::BF16;   ///< dtype the checkpoint is stored in

  /// Width of the concatenated query heads (heads * head_dim).
  int q_dim() const { return num_attention_heads * head_dim; }
  /// Width of the concatenated K (or V) heads (kv_heads * head_dim).
  int kv_dim() const { return num_key_value_heads * head_dim; }
  /// Total parameter count (embedding and LM head counted once when tied).
  std::int64_t num_parameters() const;
  /// Attention flavour: "MHA", "GQA" or "MQA".
  const char* attention_kind() const;
  /**
   * @brief Checks that every field is positive and the head counts divide.
   * @param source names the origin (file or preset) in the error message.
   * @throws Error naming the field and what was expected.
   */
  void validate(const std::string& source) const;
};

/**
 * @brief Bytes of K and V that one token occupies over all layers: the one KV-size
 *        formula, \f$ 2 \cdot layers \cdot kv\_heads \cdot head\_dim \cdot bytes(kv\_dtype) \f$.
 *
 * The 2 counts K and V; kv_heads (not query heads) is what makes GQA and MQA smaller
 * than MHA. The KV cache (f32), the engine's block budget (real and simulated), the
 * cost model's step bytes and lab 07's transfer sizes all call this. Qwen2.5-0.5B in
 * bf16: 2 · 24 · 2 · 64 · 2 = 12,288 bytes.
 * @param kv_dtype the element type the cache stores.
 */
inline std::size_t kv_bytes_per_token(const ModelConfig& config, DType kv_dtype) {
  return 2 * static_cast<std::size_t>(config.num_hidden_layers) * static_cast<std::size_t>(config.kv_dim()) *
         dtype_size(kv_dtype);
}

/**
 * @brief Reads a Hugging Face config.json (Qwen2ForCausalLM or LlamaForCausalLM).
 *
 * Accepts both the transformers 4.x spelling (`rope_theta`, `rope_scaling`,
 * `torch_dtype`) and the 5.x one (`rope_parameters`, `dtype`).
 * @throws Error naming the file and field when the file is missing, is not
 *         JSON, names another architecture, or a field is missing or invalid.
 */
ModelConfig load_config(const std::filesystem::path& config_json);

/// Same as load_config() from already-parsed JSON; @p source names it in errors.
ModelConfig parse_config(const nlohmann::json& json, const std::string& source);

/**
 * @brief A named preset with the exact shapes of a released model, or a small one for tests.
 * @throws Error listing the known names when @p name is unknown.
 */
ModelConfig preset(const std::string& name);

/// Names accepted by preset(), real models first.
std::vector<std::string> preset_names();

}  // namespace servelab
