// SPDX-License-Identifier: MIT
/**
 * @file added_tokens.h
 * @brief The `added_tokens` of a tokenizer.json (`<|im_start|>`,
 *        `<|eot_id|>`, ...): found in the text before anything else, and
 *        emitted as their own ids, never split by the regex or BPE.
 *
 * As in Hugging Face tokenizers, text that spells an added token becomes
 * that token, whoever wrote it (`tokenizer("<|im_end|>")` gives one id); a
 * chat template relies on this. Where several tokens could match, the
 * leftmost match wins, then the longest.
 */
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace servelab {

/// One entry of `added_tokens`.
struct AddedToken {
  std::int32_t id = 0;   ///< its id
  std::string content;   ///< the text it stands for, matched verbatim
  bool special = false;  ///< dropped by decode(skip_special_tokens = true)
};

/// A piece of text between added tokens, or one added token.
struct TextSegment {
  std::string_view text;    ///< the text (empty for a token)
  std::int32_t token = -1;  ///< the added token's id, or -1 for text
};

/// The added tokens of one tokenizer.
class AddedTokens {
 public:
  /// No added tokens.
  AddedTokens() = default;

  /**
   * @brief Reads the `added_tokens` array of a tokenizer.json.
   * @param source names the file in errors.
   * @throws Error naming the token when its content is empty, its id is negative
   *         or repeated, or it sets lstrip, rstrip or single_word (not implemented).
   */
  static AddedTokens from_json(const nlohmann::json& added_tokens, const std::string& source);

  /**
   * @brief Cuts @p text at every added token.
   * @param[out] segments receives, in order, the text pieces (non-empty views into
   *             @p text) and the tokens found, which concatenate back to @p text.
   */
  void split(std::string_view text, std::vector<TextSegment>& segments) const;

  /// The token with id @p id, or nullptr.
  const AddedToken* find(std::int32_t id) const;
  /// The id of the token whose content is @p content, or -1.
  std::int32_t id_of(std::string_view content) const;
  /// All added tokens, in file order.
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  std::unordered_map<std::int32_t, std::size_t> by_id_;  // id -> index in tokens_
  // First byte -> indices of the tokens starting with it, longest first.
  std::array<std::vector<std::size_t>, 256> by_first_byte_;
};

}  // namespace servelab
