// SPDX-License-Identifier: MIT
#include "config/model_config.h"

#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"

namespace servelab {

const char* arch_name(Arch arch) { return arch == Arch::Qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"; }

std::int64_t ModelConfig::num_parameters() const {
  const std::int64_t h = hidden_size, q = q_dim(), kv = kv_dim(), f = intermediate_size;
  std::int64_t per_layer = h * q + 2 * h * kv + q * h  // q, k, v, o projections
                           + 3 * h * f                 // gate, up, down
                           + 2 * h;                    // two RMSNorm weights
  if (attention_bias) per_layer += q + 2 * kv;
  const std::int64_t embed = static_cast<std::int64_t>(vocab_size) * h;
  return num_hidden_layers * per_layer + embed + (tie_word_embeddings ? 0 : embed) + h;
}

const char* ModelConfig::attention_kind() const {
  if (num_key_value_heads == num_attention_heads) return "MHA";
  return num_key_value_heads == 1 ? "MQA" : "GQA";
}

void ModelConfig::validate(const std::string& source) const {
  auto positive = [&](long long v, const char* field) {
    check(v > 0, source, ": field ", field, " must be a positive integer, got ", v);
  };
  positive(hidden_size, "hidden_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(num_key_value_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(intermediate_size, "intermediate_size");
  positive(vocab_size, "vocab_size");
  positive(max_position_embeddings, "max_position_embeddings");
  check(num_attention_heads % num_key_value_heads == 0, source, ": num_attention_heads (", num_attention_heads,
        ") must be a multiple of num_key_value_heads (", num_key_value_heads, ")");
  check(head_dim % 2 == 0, source, ": head_dim must be even for RoPE, got ", head_dim);
  // Products of fields must fit too: q_dim() is an int, and tensor sizes and
  // the parameter count are int64 (long double cannot overflow here).
  const std::int64_t heads_width = std::int64_t{num_attention_heads} * head_dim;  // both < 2^31: no overflow
  check(heads_width <= std::numeric_limits<int>::max(), source, ": num_attention_heads * head_dim = ", heads_width,
        " is too large (expected at most ", std::numeric_limits<int>::max(), ")");
  const long double h = hidden_size, q = static_cast<long double>(heads_width),
                    kv = static_cast<long double>(num_key_value_heads) * head_dim;
  const long double params =
      num_hidden_layers * (2 * h * q + 2 * h * kv + 3 * h * intermediate_size + 2 * h + q + 2 * kv) +
      2.0L * vocab_size * h + h;
  check(params < 0x1p50L, source, ": the shape asks for ", params,
        " parameters, more than any machine holds (hidden_size, intermediate_size, vocab_size or the layer count is "
        "wrong)");
  check(rope_theta > 0, source, ": rope_theta must be positive, got ", rope_theta);
  check(rms_norm_eps > 0, source, ": rms_norm_eps must be positive, got ", rms_norm_eps);
  check(rope_scaling.rope_type == "default" || rope_scaling.rope_type == "llama3", source, ": rope_scaling type '",
        rope_scaling.rope_type, "' is not supported (expected none, 'default' or 'llama3')");
  if (rope_scaling.rope_type == "llama3") {
    check(rope_scaling.factor > 0 && rope_scaling.high_freq_factor > rope_scaling.low_freq_factor &&
              rope_scaling.original_max_position_embeddings > 0,
          source,
          ": rope_scaling llama3 needs factor > 0, high_freq_factor > low_freq_factor and "
          "original_max_position_embeddings > 0");
  }
}

namespace {

// Reads config[key] as T, naming the file and field when it is missing or of the wrong type.
template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& source) {
  check(j.contains(key) && !j.at(key).is_null(), source, ": missing required field '", key, "'");
  const auto& v = j.at(key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // Checked: hidden_size 2^32 + 64 must be an error, not 64.
    return json_int<T>(v, std::numeric_limits<T>::min(), std::numeric_limits<T>::max(),
                       source + ": field '" + key + "'");
  } else if constexpr (std::is_floating_point_v<T>) {
    check(v.is_number(), source, ": field '", key, "' must be a number, got ", json_brief(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    check(v.is_boolean(), source, ": field '", key, "' must be true or false, got ", json_brief(v));
  } else {
    check(v.is_string(), source, ": field '", key, "' must be a string, got ", json_brief(v));
  }
  return v.get<T>();
}

// Same as field() but returns `fallback` when the key is absent or null.
template <typename T>
T field_or(const nlohmann::json& j, const char* key, T fallback, const std::string& source) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  return field<T>(j, key, source);
}

Arch parse_arch(const nlohmann::json& j, const std::string& source) {
  std::string name;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    name = j["architectures"][0].get<std::string>();
  } else {
    check(j.contains("model_type") && j["model_type"].is_string(), source,
          ": missing field 'architectures' (expected [\"Qwen2ForCausalLM\"] or [\"LlamaForCausalLM\"])");
    const auto type = j["model_type"].get<std::string>();
    name = type == "qwen2" ? "Qwen2ForCausalLM" : type == "llama" ? "LlamaForCausalLM" : type;
  }
  if (name == "Qwen2ForCausalLM") return Arch::Qwen2;
  if (name == "LlamaForCausalLM") return Arch::Llama;
  fail(source, ": unsupported architecture '", name, "' (expected Qwen2ForCausalLM or LlamaForCausalLM)");
}

// transformers 4.x writes rope_theta + rope_scaling; 5.x folds both into rope_parameters.
void parse_rope(const nlohmann::json& j, ModelConfig& c, const std::string& source) {
  const nlohmann::json* scaling = nullptr;
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    scaling = &j["rope_parameters"];
    c.rope_theta = field_or<double>(*scaling, "rope_theta", 10000.0, source + " rope_parameters");
  }
  c.rope_theta = field_or<double>(j, "rope_theta", c.rope_theta, source);
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) scaling = &j["rope_scaling"];
  if (scaling == nullptr) return;
  const std::string where = source + " rope scaling";
  std::string type = field_or<std::string>(*scaling, "rope_type", "", where);
  if (type.empty()) type = field_or<std::string>(*scaling, "type", "default", where);
  c.rope_scaling.rope_type = type;
  if (type != "llama3") return;
  c.rope_scaling.factor = field<double>(*scaling, "factor", where);
  c.rope_scaling.low_freq_factor = field<double>(*scaling, "low_freq_factor", where);
  c.rope_scaling.high_freq_factor = field<double>(*scaling, "high_freq_factor", where);
  c.rope_scaling.original_max_position_embeddings =
      field<std::int64_t>(*scaling, "original_max_position_embeddings", where);
}

// Fields that change what the model computes in ways the engine does not
// implement: refused by name, since running anyway gives tokens that differ
// from transformers' without a word.
void check_supported_features(const nlohmann::json& j, const std::string& source) {
  const std::string act = field_or<std::string>(j, "hidden_act", "silu", source);
  check(act == "silu", source, ": hidden_act '", act, "' is not supported (servelab's MLP computes SwiGLU with silu)");
  check(!field_or<bool>(j, "mlp_bias", false, source), source,
        ": mlp_bias is true (biases on gate/up/down_proj), which servelab does not compute (expected false)");
  check(!field_or<bool>(j, "use_sliding_window", false, source), source,
        ": use_sliding_window is true, but servelab computes full attention over the whole context (expected false)");
  if (j.contains("layer_types") && j["layer_types"].is_array())
    for (const auto& type : j["layer_types"])
      check(type == "full_attention", source, ": layer_types holds ", json_brief(type),
            "; servelab computes full attention only (expected every entry \"full_attention\")");
}

}  // namespace

ModelConfig parse_config(const nlohmann::json& j, const std::string& source) {
  check(j.is_object(), source, ": expected a JSON object at the top level");
  ModelConfig c;
  c.name = source;
  c.arch = parse_arch(j, source);
  c.hidden_size = field<int>(j, "hidden_size", source);
  c.num_hidden_layers = field<int>(j, "num_hidden_layers", source);
  c.num_attention_heads = field<int>(j, "num_attention_heads", source);
  c.num_key_value_heads = field_or<int>(j, "num_key_value_heads", c.num_attention_heads, source);
  check(c.num_attention_heads > 0, source, ": field num_attention_heads must be positive, got ", c.num_attention_heads);
  c.head_dim = field_or<int>(j, "head_dim", c.hidden_size / c.num_attention_heads, source);
  c.intermediate_size = field<int>(j, "intermediate_size", source);
  c.vocab_size = field<int>(j, "vocab_size", source);
  c.max_position_embeddings = field<int>(j, "max_position_embeddings", source);
  parse_rope(j, c, source);
  c.rms_norm_eps = field_or<double>(j, "rms_norm_eps", 1e-6, source);
  c.tie_word_embeddings = field_or<bool>(j, "tie_word_embeddings", false, source);
  // Qwen2 always has q/k/v biases (and no o_proj bias); Llama's attention_bias
  // would add biases to q/k/v *and* o_proj, which the engine does not compute.
  c.attention_bias = c.arch == Arch::Qwen2;
  check(c.arch == Arch::Qwen2 || !field_or<bool>(j, "attention_bias", false, source), source,
        ": attention_bias is true, which gives LlamaForCausalLM biases on q/k/v and o_proj; servelab does not compute "
        "them (expected false)");
  check_supported_features(j, source);
  std::string dtype = field_or<std::string>(j, "torch_dtype", "", source);
  if (dtype.empty()) dtype = field_or<std::string>(j, "dtype", "float32", source);
  c.torch_dtype = parse_dtype(dtype, source + " field torch_dtype");
  c.validate(source);
  return c;
}

ModelConfig load_config(const std::filesystem::path& config_json) {
  return parse_config(read_json_file(config_json, "a Hugging Face config.json"), config_json.string());
}

namespace {

ModelConfig make(const std::string& name, Arch arch, int hidden, int layers, int heads, int kv_heads, int intermediate,
                 int vocab, int max_pos, double theta, double eps, bool tied) {
  return ModelConfig{.name = name,
                     .arch = arch,
                     .hidden_size = hidden,
                     .num_hidden_layers = layers,
                     .num_attention_heads = heads,
                     .num_key_value_heads = kv_heads,
                     .head_dim = hidden / heads,
                     .intermediate_size = intermediate,
                     .vocab_size = vocab,
                     .max_position_embeddings = max_pos,
                     .rope_theta = theta,
                     .rope_scaling = {},
                     .rms_norm_eps = eps,
                     .tie_word_embeddings = tied,
                     .attention_bias = arch == Arch::Qwen2,
                     .torch_dtype = DType::BF16};
}

// Shapes copied from each model's published config.json on the Hugging Face Hub.
const std::vector<ModelConfig>& presets() {
  static const std::vector<ModelConfig> all = {
      make("qwen2.5-0.5b", Arch::Qwen2, 896, 24, 14, 2, 4864, 151936, 32768, 1e6, 1e-6, true),
      make("qwen2.5-1.5b", Arch::Qwen2, 1536, 28, 12, 2, 8960, 151936, 32768, 1e6, 1e-6, true),
      make("llama-3-8b", Arch::Llama, 4096, 32, 32, 8, 14336, 128256, 8192, 5e5, 1e-5, false),
      make("llama-3-70b", Arch::Llama, 8192, 80, 64, 8, 28672, 128256, 8192, 5e5, 1e-5, false),
      // Small shapes so that tests and quick lab runs finish in seconds.
      make("small", Arch::Qwen2, 256, 4, 8, 2, 704, 8192, 4096, 1e6, 1e-6, true),
      make("tiny", Arch::Qwen2, 64, 2, 4, 2, 128, 512, 1024, 1e6, 1e-6, true),
      make("tiny-llama", Arch::Llama, 64, 2, 4, 2, 128, 512, 1024, 5e5, 1e-5, false),
  };
  return all;
}

}  // namespace

ModelConfig preset(const std::string& name) {
  for (const auto& c : presets())
    if (c.name == name) return c;
  std::ostringstream known;
  for (const auto& n : preset_names()) known << ' ' << n;
  fail("unknown preset '", name, "' (expected one of:", known.str(), ")");
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& c : presets()) names.push_back(c.name);
  return names;
}

}  // namespace servelab
