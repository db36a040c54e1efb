// SPDX-License-Identifier: MIT
#include "tokenizer/added_tokens.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "tokenizer/bpe.h"

namespace servelab {

AddedTokens AddedTokens::from_json(const nlohmann::json& added_tokens, const std::string& source) {
  AddedTokens result;
  if (added_tokens.is_null()) return result;
  check(added_tokens.is_array(), source, ": added_tokens must be an array");
  for (std::size_t i = 0; i < added_tokens.size(); ++i) {
    const auto& t = added_tokens[i];
    const std::string where = source + ": added_tokens[" + std::to_string(i) + "]";
    check(t.is_object() && t.contains("id"), where, " has no \"id\"");
    // Checked: an id of 2^31 or more would be narrowed and index out of bounds.
    const auto id = json_int<std::int32_t>(t["id"], 0, kMaxTokenIds - 1, where + ".id");
    check(t.contains("content") && t["content"].is_string() && !t["content"].get<std::string>().empty(), where,
          " has no \"content\"");
    AddedToken token{id, t["content"].get<std::string>(), t.value("special", false)};
    // These change which text a token swallows; no byte-level model servelab targets sets them.
    for (const char* flag : {"lstrip", "rstrip", "single_word"})
      check(!t.value(flag, false), where, " ('", token.content, "') sets ", flag,
            ", which servelab does not implement");
    check(!result.by_id_.contains(token.id), where, " repeats id ", token.id);
    result.by_id_[token.id] = result.tokens_.size();
    result.tokens_.push_back(std::move(token));
  }
  for (std::size_t i = 0; i < result.tokens_.size(); ++i)
    result.by_first_byte_[static_cast<unsigned char>(result.tokens_[i].content[0])].push_back(i);
  for (auto& list : result.by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
      return result.tokens_[a].content.size() > result.tokens_[b].content.size();
    });
  return result;
}

void AddedTokens::split(std::string_view text, std::vector<TextSegment>& segments) const {
  std::size_t last = 0, pos = 0;
  while (pos < text.size()) {
    const AddedToken* match = nullptr;
    for (std::size_t i : by_first_byte_[static_cast<unsigned char>(text[pos])])
      if (text.substr(pos).starts_with(tokens_[i].content)) {
        match = &tokens_[i];
        break;
      }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    if (pos > last) segments.push_back({text.substr(last, pos - last), -1});
    segments.push_back({{}, match->id});
    pos = last = pos + match->content.size();
  }
  if (last < text.size()) segments.push_back({text.substr(last), -1});
}

const AddedToken* AddedTokens::find(std::int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::int32_t AddedTokens::id_of(std::string_view content) const {
  for (const auto& t : tokens_)
    if (t.content == content) return t.id;
  return -1;
}

}  // namespace servelab
