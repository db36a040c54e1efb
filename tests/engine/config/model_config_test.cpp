// SPDX-License-Identifier: MIT
// config.json parsing (both transformers 4.x and 5.x spellings), presets, and
// one clear error per kind of bad config.
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "config/model_config.h"
#include "test_util.h"

using namespace servelab;
using nlohmann::json;

namespace {

// A transformers 4.x-style Llama 3 config, as published on the Hub.
json llama3_v4_config() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256})");
}

}  // namespace

TEST_CASE("transformers 5.x config.json of the Qwen2 fixture", "[config]") {
  const ModelConfig c = load_config(test::fixtures_dir() / "qwen2-tiny" / "config.json");
  CHECK(c.arch == Arch::Qwen2);
  CHECK(c.hidden_size == 64);
  CHECK(c.num_attention_heads == 4);
  CHECK(c.num_key_value_heads == 2);
  CHECK(c.head_dim == 16);  // derived: no head_dim key in Qwen2 configs
  CHECK(c.rope_theta == 1e6);
  CHECK(c.tie_word_embeddings);
  CHECK(c.attention_bias);  // Qwen2 always has q/k/v bias
  CHECK(c.torch_dtype == DType::F32);
  CHECK(std::string(c.attention_kind()) == "GQA");
}

TEST_CASE("transformers 5.x config.json of the Llama fixture: explicit head_dim and llama3 rope", "[config]") {
  const ModelConfig c = load_config(test::fixtures_dir() / "llama-tiny-f16" / "config.json");
  CHECK(c.arch == Arch::Llama);
  CHECK(c.head_dim == 16);
  CHECK(c.q_dim() == 128);
  CHECK(c.hidden_size == 96);
  CHECK_FALSE(c.attention_bias);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.rope_theta == 500000.0);
  CHECK(c.rope_scaling.rope_type == "llama3");
  CHECK(c.rope_scaling.original_max_position_embeddings == 40);
  CHECK(c.torch_dtype == DType::F16);
}

TEST_CASE("transformers 4.x spelling: rope_theta / rope_scaling / torch_dtype", "[config]") {
  const ModelConfig c = parse_config(llama3_v4_config(), "config.json");
  CHECK(c.rope_theta == 500000.0);
  CHECK(c.rope_scaling.rope_type == "llama3");
  CHECK(c.rope_scaling.factor == 8.0);
  CHECK(c.torch_dtype == DType::BF16);
  CHECK(c.head_dim == 128);
  CHECK(c.num_parameters() == preset("llama-3-8b").num_parameters());
}

TEST_CASE("presets carry the published shapes", "[config]") {
  // Parameter counts as published: Qwen2.5-0.5B 0.49B, 1.5B 1.54B, Llama-3 8.03B and 70.6B.
  CHECK(preset("qwen2.5-0.5b").num_parameters() == 494032768);
  CHECK(preset("qwen2.5-1.5b").num_parameters() == 1543714304);
  CHECK(preset("llama-3-8b").num_parameters() == 8030261248);
  CHECK(preset("llama-3-70b").num_parameters() == 70553706496);
  CHECK(std::string(preset("qwen2.5-0.5b").attention_kind()) == "GQA");
  for (const auto& name : preset_names()) CHECK_NOTHROW(preset(name).validate(name));
}

TEST_CASE("MHA / GQA and MQA are the same config with a different kv head count", "[config]") {
  ModelConfig c = preset("tiny");
  c.num_key_value_heads = c.num_attention_heads;
  CHECK(std::string(c.attention_kind()) == "MHA");
  c.num_key_value_heads = 1;
  CHECK(std::string(c.attention_kind()) == "MQA");
  CHECK_NOTHROW(c.validate("tiny"));
  c.num_key_value_heads = 3;  // 4 heads cannot be split into 3 groups
  REQUIRE_ERROR_MENTIONS(c.validate("tiny"), "num_key_value_heads", "multiple");
}

TEST_CASE("bad config.json: each gives one error naming the file and field", "[config][bad-input]") {
  test::ScratchDir dir("config");
  const auto path = dir.path() / "config.json";
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };

  REQUIRE_ERROR_MENTIONS(load_config(dir.path() / "missing.json"), "missing.json", "cannot open");
  write("{\"hidden_size\": 64,");
  REQUIRE_ERROR_MENTIONS(load_config(path), path.string(), "not valid JSON");
  json j = llama3_v4_config();
  j["architectures"] = {"MistralForCausalLM"};
  write(j.dump());
  REQUIRE_ERROR_MENTIONS(load_config(path), path.string(), "MistralForCausalLM", "Qwen2ForCausalLM");
  j = llama3_v4_config();
  j.erase("hidden_size");
  write(j.dump());
  REQUIRE_ERROR_MENTIONS(load_config(path), path.string(), "hidden_size");
  j = llama3_v4_config();
  j["num_hidden_layers"] = "32";
  write(j.dump());
  REQUIRE_ERROR_MENTIONS(load_config(path), "num_hidden_layers", "integer");
  j = llama3_v4_config();
  j["vocab_size"] = 0;
  write(j.dump());
  REQUIRE_ERROR_MENTIONS(load_config(path), "vocab_size", "positive");
  j = llama3_v4_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  write(j.dump());
  REQUIRE_ERROR_MENTIONS(load_config(path), "rope_scaling", "yarn");
  j = llama3_v4_config();
  j["torch_dtype"] = "int8";
  write(j.dump());
  REQUIRE_ERROR_MENTIONS(load_config(path), "torch_dtype", "int8");
}

// Each of these used to be narrowed or ignored, and the model ran with a
// different shape or computation than config.json describes.
TEST_CASE("integers that do not fit and shapes whose products overflow are refused", "[config][bad-input]") {
  json j = llama3_v4_config();
  j["hidden_size"] = 4294967360LL;  // 2^32 + 64: used to run as 64
  REQUIRE_ERROR_MENTIONS(parse_config(j, "c.json"), "c.json: field 'hidden_size' must be an integer", "got 4294967360");
  j = llama3_v4_config();
  j["vocab_size"] = 1000000000000LL;  // used to be reported as -727379968
  REQUIRE_ERROR_MENTIONS(parse_config(j, "c.json"), "field 'vocab_size'", "got 1000000000000");
  j = llama3_v4_config();
  j["num_attention_heads"] = 65536;
  j["num_key_value_heads"] = 1;
  j["head_dim"] = 65536;  // q_dim() = 2^32 overflowed an int
  REQUIRE_ERROR_MENTIONS(parse_config(j, "c.json"), "num_attention_heads * head_dim = 4294967296 is too large");
  j = llama3_v4_config();
  j["intermediate_size"] = 2000000000;
  j["num_hidden_layers"] = 2000000000;  // every field fits an int, the parameter count does not fit anything
  REQUIRE_ERROR_MENTIONS(parse_config(j, "c.json"), "c.json: the shape asks for", "parameters");
}

TEST_CASE("config fields the engine does not compute are refused by name", "[config][bad-input]") {
  const std::pair<const char*, json> unsupported[] = {{"use_sliding_window", true},
                                                      {"hidden_act", "gelu_pytorch_tanh"},
                                                      {"mlp_bias", true},
                                                      {"attention_bias", true},  // Llama: biases on q/k/v and o_proj
                                                      {"layer_types", {"full_attention", "sliding_attention"}}};
  for (const auto& [field, value] : unsupported) {
    json j = llama3_v4_config();
    j[field] = value;
    INFO(field);
    REQUIRE_ERROR_MENTIONS(parse_config(j, "c.json"), "c.json: ", field);
  }
  // The values the engine does compute are accepted.
  json j = llama3_v4_config();
  j["use_sliding_window"] = false;
  j["hidden_act"] = "silu";
  j["mlp_bias"] = false;
  j["attention_bias"] = false;
  j["layer_types"] = {"full_attention", "full_attention"};
  CHECK(parse_config(j, "c.json").hidden_size == 4096);
}

TEST_CASE("an unknown preset lists the known ones", "[config][bad-input]") {
  REQUIRE_ERROR_MENTIONS(preset("qwen9"), "qwen9", "qwen2.5-0.5b", "llama-3-8b");
}
