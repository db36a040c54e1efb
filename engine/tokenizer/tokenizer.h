// SPDX-License-Identifier: MIT
/**
 * @file tokenizer.h
 * @brief A byte-level BPE tokenizer read from a Hugging Face tokenizer.json:
 *        text -> ids and ids -> text, matching the `tokenizers` library id for id.
 *
 * Encoding runs the tokenizer.json pipeline in its order:
 * @verbatim
 *   text ─ added tokens (<|im_start|> ...) found first ─┬─ token ids
 *                                                       └─ other text ─ normalizer (NFC)
 *        ─ pre_tokenizer (split regex) ─ BPE per word ─ ids ─ post_processor (e.g. + <|begin_of_text|>)
 * @endverbatim
 * Decoding maps each id back to its bytes and turns invalid UTF-8 into U+FFFD,
 * as tokenizers' ByteLevel decoder does; added tokens come out verbatim.
 *
 * Where servelab differs from `tokenizers`, it is on purpose and stated at
 * each function: invalid UTF-8 input and unknown ids are errors rather than
 * being replaced or skipped silently.
 */
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenizer.h"

namespace servelab {

/// A loaded tokenizer. Immutable; encode() and decode() may run on several threads at once.
class Tokenizer {
 public:
  /**
   * @brief Loads a tokenizer.json.
   * @throws Error naming the file when it cannot be read or is not JSON, and
   *         naming the field when the tokenizer is not byte-level BPE or uses a
   *         step servelab does not implement (see from_json()).
   */
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);

  /**
   * @brief Builds a tokenizer from a parsed tokenizer.json.
   *
   * Supported: model BPE (vocab, merges in either form, ignore_merges);
   * normalizer null or NFC; pre_tokenizer ByteLevel or Sequence[Split..., ByteLevel];
   * post_processor null, ByteLevel, TemplateProcessing or a Sequence of those;
   * decoder ByteLevel.
   * @param source names the file in errors.
   */
  static Tokenizer from_json(const nlohmann::json& json, const std::string& source);

  /**
   * @brief Builds a tokenizer from its steps, as a GGUF's tokenizer.ggml.* keys describe them.
   * @param prefix ids put before the text when encode() adds special tokens (a bos id).
   * @param suffix ids put after it (an eos id).
   * @throws Error naming @p source when a prefix or suffix id is not a token.
   */
  static Tokenizer from_parts(std::string source, Normalizer normalizer, PreTokenizer pre_tokenizer, BpeModel model,
                              AddedTokens added, std::vector<std::int32_t> prefix, std::vector<std::int32_t> suffix);

  /**
   * @brief Token ids of @p text.
   * @param text UTF-8 text.
   * @param add_special_tokens apply the post_processor (Llama 3 puts <|begin_of_text|>
   *        first); true by default, like `tokenizer(text)` in transformers.
   * @return ids, each < vocab_size().
   * @throws Error when @p text is not valid UTF-8, with the byte offset of the
   *         first bad byte (`tokenizers` cannot be given such text at all).
   */
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = true) const;

  /**
   * @brief Text of @p ids: tokens' bytes concatenated, invalid UTF-8 replaced by U+FFFD.
   *
   * The bytes between two added tokens are repaired as one run, so a character
   * cut by an added token becomes U+FFFD on both sides, as in `tokenizers`.
   * @param skip_special_tokens leave out added tokens marked special.
   * @throws Error naming the id when it is negative, >= vocab_size() or unused
   *         (`tokenizers` skips such ids silently).
   */
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  /// Whether @p id is a vocabulary entry or added token (a model's padded vocabulary can be larger).
  bool has_id(std::int32_t id) const { return id >= 0 && id < vocab_size() && used_[id]; }

  /// One more than the largest id in use (vocabulary and added tokens).
  std::int32_t vocab_size() const { return static_cast<std::int32_t>(pieces_.size()); }

  /**
   * @brief The vocabulary spelling of @p id (`Ġhello` for " hello"), or an added token's content.
   * @throws Error as decode() does for a bad id.
   */
  const std::string& piece(std::int32_t id) const;

  /**
   * @brief The raw bytes that @p id stands for (an added token: its content).
   * @throws Error as decode() does for a bad id.
   */
  const std::string& bytes(std::int32_t id) const;

  /// Id of the vocabulary entry or added token spelled @p piece, if any.
  std::optional<std::int32_t> token_to_id(std::string_view piece) const;
  /// The added token with this id, or nullptr (a normal vocabulary entry).
  const AddedToken* added_token(std::int32_t id) const { return added_.find(id); }
  /// All added tokens.
  const AddedTokens& added_tokens() const { return added_; }
  /// The normalizer step.
  const Normalizer& normalizer() const { return normalizer_; }
  /// Number of BPE merges.
  std::size_t num_merges() const { return model_.num_merges(); }
  /// The file (or description) the tokenizer was read from.
  const std::string& source() const { return source_; }

 private:
  Tokenizer(std::string source, Normalizer normalizer, PreTokenizer pre_tokenizer, BpeModel model, AddedTokens added);
  void check_id(std::int32_t id) const;
  void encode_text(std::string_view text, std::vector<std::int32_t>& ids) const;

  std::string source_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  AddedTokens added_;
  std::vector<std::string> pieces_;   // [vocab_size] vocabulary spelling; empty for unused ids
  std::vector<std::string> bytes_;    // [vocab_size] what each id decodes to
  std::vector<bool> used_;            // [vocab_size] whether the id exists
  std::vector<std::int32_t> prefix_;  // post_processor ids before the text
  std::vector<std::int32_t> suffix_;  // post_processor ids after the text
};

}  // namespace servelab
