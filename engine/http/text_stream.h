// SPDX-License-Identifier: MIT
/**
 * @file text_stream.h
 * @brief A reply's text as it streams: token ids through the streaming
 *        detokenizer, then stop strings (OpenAI's `stop`) cut out, without
 *        ever sending text that a later token turns into a stop string.
 * @verbatim
 *  stop = ["\n\n"]         pushed      held back     sent
 *  token "Hi"              "Hi"        ""            "Hi"
 *  token "\n"              "\n"        "\n"          ""      (could start "\n\n")
 *  token "\n"              "\n"        -             ""      stop: "\n\n" is cut, the reply ends
 * @endverbatim
 * What is held back is the longest tail of the text that is the beginning of
 * some stop string, so a match always lies wholly in the held-back text.
 * Without a tokenizer (a synthetic preset) there is no text: only token ids.
 */
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/detokenizer.h"

namespace servelab {

/// One reply's text, token by token.
class TextStream {
 public:
  /**
   * @param tokenizer the model's tokenizer, or null when it has none (then every piece is empty).
   * @param stop stop strings (not empty strings); the reply ends before the first one found.
   */
  TextStream(const Tokenizer* tokenizer, std::vector<std::string> stop);
  /// Adds token @p id; returns the text that may be sent now (possibly empty).
  std::string push(std::int32_t id);
  /// Ends the reply: the text still held back (none after a stop string).
  std::string finish();
  /// True once a stop string was found; the caller aborts the request and reports finish_reason "stop".
  bool stopped() const { return stopped_; }

 private:
  std::string release(bool final);

  const Tokenizer* tokenizer_;
  std::optional<StreamingDetokenizer> detokenizer_;
  std::vector<std::string> stop_;
  std::string held_;  // decoded text not yet sent: a possible beginning of a stop string
  bool stopped_ = false;
};

}  // namespace servelab
