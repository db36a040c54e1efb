// SPDX-License-Identifier: MIT
#include "model/pretrained.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "model/gguf.h"

namespace servelab {

namespace {

// The file's contents, or nothing when it does not exist.
std::optional<std::string> read_if_present(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  check(in.good(), path.string(), ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A JSON file of the model folder, or null when it does not exist.
nlohmann::json read_json_if_present(const std::filesystem::path& path) {
  const auto text = read_if_present(path);
  if (!text) return nullptr;
  return parse_json(*text, path.string());
}

// tokenizer_config.json writes a token as "<s>" or as {"content": "<s>", ...}.
std::string token_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return {};
}

}  // namespace

bool has_tokenizer(const std::filesystem::path& model) {
  if (is_gguf_path(model)) return GgufFile(model).contents().metadata.contains("tokenizer.ggml.model");
  return std::filesystem::exists(model / "tokenizer.json");
}

Tokenizer load_tokenizer(const std::filesystem::path& dir) {
  if (is_gguf_path(dir)) return gguf_tokenizer(GgufFile(dir).contents(), dir.string());
  const auto path = dir / "tokenizer.json";
  check(std::filesystem::exists(path), path.string(), ": cannot open (the folder has no tokenizer.json)");
  return Tokenizer::from_file(path);
}

ChatTemplate load_chat_template(const std::filesystem::path& dir) {
  if (is_gguf_path(dir)) return gguf_chat_template(GgufFile(dir).contents(), dir.string());
  const auto config_path = dir / "tokenizer_config.json";
  const nlohmann::json config = read_json_if_present(config_path);
  std::string source = config_path.string(), jinja;
  if (config.is_object() && config.contains("chat_template")) {
    const auto& t = config["chat_template"];
    if (t.is_string()) {
      jinja = t.get<std::string>();
    } else if (t.is_array()) {
      // As transformers: the template named "default" is the one apply_chat_template uses.
      for (const auto& named : t)
        if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
            named["template"].is_string())
          jinja = named["template"].get<std::string>();
      check(!jinja.empty(), source, ": chat_template is a list without a \"default\" template");
    } else {
      fail(source, ": chat_template must be a string or a list of {name, template}");
    }
  } else if (auto file = read_if_present(dir / "chat_template.jinja")) {
    jinja = std::move(*file);
    source = (dir / "chat_template.jinja").string();
  } else {
    fail(dir.string(), ": no chat template (neither tokenizer_config.json's chat_template nor chat_template.jinja)");
  }
  // transformers' special_tokens_map: the named special tokens that are set.
  ChatTemplate::SpecialTokens tokens;
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
    if (config.is_object() && config.contains(name))
      if (std::string text = token_text(config[name]); !text.empty()) tokens.emplace_back(name, std::move(text));
  return ChatTemplate(jinja, std::move(tokens), source);
}

std::vector<std::int32_t> load_stop_token_ids(const std::filesystem::path& dir, const Tokenizer& tokenizer) {
  if (is_gguf_path(dir)) return gguf_stop_token_ids(GgufFile(dir).contents(), dir.string());
  std::vector<std::int32_t> ids;
  const auto gen_path = dir / "generation_config.json";
  const nlohmann::json gen = read_json_if_present(gen_path);
  if (gen.is_object() && gen.contains("eos_token_id") && !gen["eos_token_id"].is_null()) {
    const auto& eos = gen["eos_token_id"];
    const auto add = [&](const nlohmann::json& v) {
      ids.push_back(json_int<std::int32_t>(v, 0, tokenizer.vocab_size() - 1,
                                           gen_path.string() + ": eos_token_id (a token id of the tokenizer)"));
    };
    if (eos.is_array()) {
      for (const auto& v : eos) add(v);
    } else {
      add(eos);
    }
    return ids;
  }
  const auto config_path = dir / "tokenizer_config.json";
  const nlohmann::json config = read_json_if_present(config_path);
  if (config.is_object() && config.contains("eos_token") && !config["eos_token"].is_null()) {
    const std::string eos = token_text(config["eos_token"]);
    const auto id = tokenizer.token_to_id(eos);
    check(id.has_value(), config_path.string(), ": eos_token '", eos, "' is not a token of ", tokenizer.source());
    ids.push_back(*id);
  }
  return ids;
}

}  // namespace servelab
