// SPDX-License-Identifier: MIT
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/utf8.h"
#include "tokenizer/byte_level.h"

namespace servelab {

namespace {

// Reads the post_processor's ids for a single sequence: those before "$A" and those after it.
void read_post_processor(const nlohmann::json& p, const std::string& source, std::vector<std::int32_t>& prefix,
                         std::vector<std::int32_t>& suffix) {
  if (p.is_null()) return;
  const std::string type = p.value("type", "");
  if (type == "ByteLevel") return;  // only adjusts offsets, which servelab does not report
  if (type == "Sequence") {
    for (const auto& step : p.at("processors")) read_post_processor(step, source, prefix, suffix);
    return;
  }
  check(type == "TemplateProcessing", source, ": post_processor type '", type,
        "' is not supported (expected ByteLevel, TemplateProcessing or a Sequence of those)");
  bool seen_sequence = false;
  for (const auto& item : p.at("single")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const auto& special = p.at("special_tokens");
    check(special.contains(name), source, ": post_processor.special_tokens has no entry '", name, "'");
    for (const auto& id : special[name].at("ids"))
      (seen_sequence ? suffix : prefix)
          .push_back(json_int<std::int32_t>(id, 0, kMaxTokenIds - 1,
                                            source + ": post_processor.special_tokens['" + name + "'].ids"));
  }
}

}  // namespace

Tokenizer::Tokenizer(std::string source, Normalizer normalizer, PreTokenizer pre_tokenizer, BpeModel model,
                     AddedTokens added)
    : source_(std::move(source)),
      normalizer_(normalizer),
      pre_tokenizer_(std::move(pre_tokenizer)),
      model_(std::move(model)),
      added_(std::move(added)) {
  std::int32_t size = 0;
  for (const auto& [piece, id] : model_.vocab()) size = std::max(size, id + 1);
  for (const auto& t : added_.tokens()) size = std::max(size, t.id + 1);
  pieces_.resize(size);
  bytes_.resize(size);
  used_.assign(size, false);
  for (const auto& [piece, id] : model_.vocab()) {
    pieces_[id] = piece;
    used_[id] = true;
    // tokenizers' ByteLevel decoder falls back to a token's own UTF-8 when a character is outside the alphabet.
    if (!symbols_to_bytes(piece, bytes_[id])) bytes_[id] = piece;
  }
  // An added token that is also in the vocabulary decodes as the added token, as in tokenizers.
  for (const auto& t : added_.tokens()) {
    pieces_[t.id] = bytes_[t.id] = t.content;
    used_[t.id] = true;
  }
}

Tokenizer Tokenizer::from_json(const nlohmann::json& json, const std::string& source) {
  try {
    check(json.is_object(), source, ": expected a JSON object (a Hugging Face tokenizer.json)");
    check(json.contains("model"), source, ": has no \"model\" field; is this a tokenizer.json?");
    const std::string decoder = json.contains("decoder") && json["decoder"].is_object()
                                    ? json["decoder"].value("type", "")
                                    : std::string("null");
    check(decoder == "ByteLevel", source, ": decoder type '", decoder,
          "' is not supported; servelab supports byte-level BPE only (expected ByteLevel)");
    const nlohmann::json null;
    const auto get = [&](const char* key) -> const nlohmann::json& { return json.contains(key) ? json[key] : null; };
    BpeModel model = BpeModel::from_json(json["model"], source);
    Tokenizer t(source, Normalizer::from_json(get("normalizer"), source),
                PreTokenizer::from_json(get("pre_tokenizer"), source), std::move(model),
                AddedTokens::from_json(get("added_tokens"), source));
    read_post_processor(get("post_processor"), source, t.prefix_, t.suffix_);
    for (std::int32_t id : t.prefix_) t.check_id(id);
    for (std::int32_t id : t.suffix_) t.check_id(id);
    return t;
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong JSON type or missing deeper down: name the file and what nlohmann saw.
    fail(source, ": malformed tokenizer.json: ", e.what());
  }
}

Tokenizer Tokenizer::from_parts(std::string source, Normalizer normalizer, PreTokenizer pre_tokenizer, BpeModel model,
                                AddedTokens added, std::vector<std::int32_t> prefix, std::vector<std::int32_t> suffix) {
  Tokenizer t(std::move(source), normalizer, std::move(pre_tokenizer), std::move(model), std::move(added));
  t.prefix_ = std::move(prefix);
  t.suffix_ = std::move(suffix);
  for (std::int32_t id : t.prefix_) t.check_id(id);
  for (std::int32_t id : t.suffix_) t.check_id(id);
  return t;
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  const std::string source = tokenizer_json.string();
  return from_json(read_json_file(tokenizer_json, "a Hugging Face tokenizer.json"), source);
}

void Tokenizer::check_id(std::int32_t id) const {
  check(id >= 0 && id < vocab_size(), "token id ", id, " is outside the tokenizer's vocabulary [0, ", vocab_size(),
        ") of ", source_);
  check(has_id(id), "token id ", id, " is not assigned to any token in ", source_);
}

const std::string& Tokenizer::piece(std::int32_t id) const {
  check_id(id);
  return pieces_[id];
}

const std::string& Tokenizer::bytes(std::int32_t id) const {
  check_id(id);
  return bytes_[id];
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view piece) const {
  if (const std::int32_t id = added_.id_of(piece); id >= 0) return id;
  if (const auto it = model_.vocab().find(piece); it != model_.vocab().end()) return it->second;
  return std::nullopt;
}

void Tokenizer::encode_text(std::string_view text, std::vector<std::int32_t>& ids) const {
  std::string normalized = normalizer_.apply(text);
  if (pre_tokenizer_.add_prefix_space() && !normalized.starts_with(' ')) normalized.insert(0, 1, ' ');
  thread_local std::vector<std::string_view> words;
  words.clear();
  pre_tokenizer_.split(normalized, words);
  for (std::string_view word : words) model_.encode_word(word, ids);
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  check_utf8(text, "text to encode");
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + prefix_.size() + suffix_.size());
  if (add_special_tokens) ids.insert(ids.end(), prefix_.begin(), prefix_.end());
  std::vector<TextSegment> segments;
  added_.split(text, segments);
  for (const auto& segment : segments) {
    if (segment.token >= 0)
      ids.push_back(segment.token);
    else
      encode_text(segment.text, ids);
  }
  if (add_special_tokens) ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  for (std::int32_t id : ids) check_id(id);
  std::string out, run;  // run: bytes since the last added token, repaired as one piece
  for (std::int32_t id : ids) {
    if (const AddedToken* added = added_.find(id)) {
      if (skip_special_tokens && added->special) continue;
      out += to_valid_utf8(run);
      run.clear();
      out += added->content;
    } else {
      run += bytes_[id];
    }
  }
  out += to_valid_utf8(run);
  return out;
}

}  // namespace servelab
