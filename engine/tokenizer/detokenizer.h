// SPDX-License-Identifier: MIT
/**
 * @file detokenizer.h
 * @brief Streaming detokenization: turn ids into text one id at a time, as a
 *        server streams a reply, without ever emitting half a character.
 *
 * A byte-level token can end inside a multi-byte character: "한" is three
 * bytes and an emoji four, and they may arrive in two or more tokens. The
 * detokenizer holds back an incomplete character until the token that
 * completes it arrives, and turns bytes that can never become valid into
 * U+FFFD. The concatenation of everything push() and finish() return equals
 * Tokenizer::decode() of all the ids, so streaming and non-streaming output agree.
 * @verbatim
 *   ids        ... "Hi "   0xED 0x95   0x9C        "!"
 *   emitted    ... "Hi "   ""          "한"        "!"
 * @endverbatim
 */
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace servelab {

/// Incremental decoder for one sequence. Holds a reference to the tokenizer, which must outlive it.
class StreamingDetokenizer {
 public:
  /**
   * @param tokenizer the tokenizer the ids come from.
   * @param skip_special_tokens leave out special added tokens (`<|im_end|>`), as a chat reply does.
   */
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = true)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

  /**
   * @brief Adds one id.
   * @return the text that became complete (valid UTF-8, possibly empty).
   * @throws Error naming the id when the tokenizer has no such id.
   */
  std::string push(std::int32_t id);

  /// Ends the sequence: returns what is held back, an incomplete character becoming U+FFFD.
  std::string finish();

 private:
  std::string take_complete();

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // bytes not yet emitted: at most one incomplete character (< 4 bytes)
};

}  // namespace servelab
