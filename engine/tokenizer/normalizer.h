// SPDX-License-Identifier: MIT
/**
 * @file normalizer.h
 * @brief The `normalizer` step of a tokenizer.json: none, or Unicode NFC
 *        (Qwen2 uses NFC so that "한" typed as three jamo and as one
 *        syllable encode to the same ids).
 */
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace servelab {

/// Unicode normalization applied to text before pre-tokenization.
class Normalizer {
 public:
  /// Which normalization form.
  enum class Form { None, NFC };

  /// No normalization.
  Normalizer() = default;
  /// Normalizes to @p form.
  explicit Normalizer(Form form) : form_(form) {}

  /**
   * @brief Reads the `normalizer` field of a tokenizer.json.
   * @param json the field's value: null, `{"type": "NFC"}`, or a `Sequence` of those.
   * @param source names the file in errors.
   * @throws Error naming the normalizer type when it is not one of these.
   */
  static Normalizer from_json(const nlohmann::json& json, const std::string& source);

  /// The form.
  Form form() const { return form_; }

  /**
   * @brief @p text normalized (utf8proc, Unicode 15 tables).
   * @pre @p text is valid UTF-8.
   */
  std::string apply(std::string_view text) const;

 private:
  Form form_ = Form::None;
};

}  // namespace servelab
