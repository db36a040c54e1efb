// SPDX-License-Identifier: MIT
/**
 * @file pretokenizer.h
 * @brief The `pre_tokenizer` step of a byte-level BPE tokenizer.json: cut
 *        normalized text into words with the model's split regex, so that
 *        BPE never merges across a word boundary.
 *
 * Supported shapes (those of GPT-2, Qwen2 and Llama 3):
 * @verbatim
 *   ByteLevel{use_regex: true}                      GPT-2: the built-in GPT-2 regex
 *   Sequence[Split{Regex, Isolated}, ..., ByteLevel{use_regex: false}]   Qwen2, Llama 3
 * @endverbatim
 * The regex is the Oniguruma pattern from the file, compiled with PCRE2 in
 * UTF + UCP mode (so `\p{L}`, `\s` and `(?i:...)` mean the same), with its JIT
 * when available. Each match and each gap between matches becomes a word
 * ("Isolated"). ByteLevel's `add_prefix_space` puts a space in front of text
 * that does not start with one.
 */
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace servelab {

/// Splits text into words; shareable between threads (matching state is per call).
class PreTokenizer {
 public:
  /**
   * @brief Reads the `pre_tokenizer` field of a tokenizer.json.
   * @param source names the file in errors.
   * @throws Error naming the step when it is not one of the supported shapes,
   *         there is no ByteLevel step, or a regex does not compile (with
   *         PCRE2's message and the offset in the pattern).
   */
  static PreTokenizer from_json(const nlohmann::json& json, const std::string& source);

  /**
   * @brief Builds a pre-tokenizer from split regexes applied in order.
   * @param patterns Oniguruma/PCRE2 patterns; each match and each gap is a word.
   * @param add_prefix_space prepend ' ' to text that does not start with one.
   * @param source names the origin in errors.
   */
  PreTokenizer(const std::vector<std::string>& patterns, bool add_prefix_space, const std::string& source);
  ~PreTokenizer();
  /// Movable, not copyable: it owns the compiled PCRE2 code.
  PreTokenizer(PreTokenizer&&) noexcept;
  /// Move assignment (see the move constructor).
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  /// Whether ByteLevel puts a space in front of text that does not start with one.
  bool add_prefix_space() const { return add_prefix_space_; }

  /**
   * @brief Appends the words of @p text to @p words, in order; they concatenate back to @p text.
   * @param text valid UTF-8 (not checked again here); add_prefix_space is the caller's job.
   * @param[out] words views into @p text.
   */
  void split(std::string_view text, std::vector<std::string_view>& words) const;

 private:
  class Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
  bool add_prefix_space_ = false;
};

/// GPT-2's split regex, which ByteLevel{use_regex: true} uses.
extern const char* const kGpt2SplitPattern;

}  // namespace servelab
