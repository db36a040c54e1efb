// SPDX-License-Identifier: MIT
/**
 * @file utf8.h
 * @brief UTF-8 validation, lossy repair and encoding: the byte-level rules that
 *        the tokenizer, its streaming detokenizer and the chat templates share.
 *
 * Byte-level BPE works on bytes, so a token can end in the middle of a
 * character and a sequence of ids can decode to bytes that are not valid
 * UTF-8. Hugging Face tokenizers turns such bytes into U+FFFD with Rust's
 * `String::from_utf8_lossy`, which replaces each *maximal invalid subpart*
 * (Unicode 15, §3.9 "U+FFFD substitution of maximal subparts") with one
 * U+FFFD. to_valid_utf8() does exactly the same, so decoded text matches.
 */
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace servelab {

/// The replacement character U+FFFD in UTF-8.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

/**
 * @brief Classifies the bytes of @p s starting at @p pos.
 * @return n > 0: a complete valid character of n bytes starts there;
 *         0: the bytes up to the end of @p s are a valid but incomplete
 *            prefix of a character (more bytes may still complete it);
 *         -n < 0: the first n bytes are a maximal invalid subpart, to be
 *            replaced by one U+FFFD.
 * @pre pos < s.size().
 */
int utf8_classify(std::string_view s, std::size_t pos);

/// @p bytes with every maximal invalid subpart (a truncated tail included) replaced by U+FFFD.
std::string to_valid_utf8(std::string_view bytes);

/**
 * @brief Throws unless @p text is valid UTF-8.
 * @param what names the input in the message (a file, a flag, "text").
 * @throws Error "<what>: invalid UTF-8 at byte offset N (0xXX)" at the first bad byte.
 */
void check_utf8(std::string_view text, const std::string& what);

/// Appends code point @p cp (at most U+10FFFF, not a surrogate) to @p out as UTF-8.
void append_utf8(std::string& out, char32_t cp);

/**
 * @brief Decodes the character at @p pos of valid UTF-8 @p s and advances @p pos past it.
 * @pre s is valid UTF-8 (see check_utf8()) and pos < s.size().
 */
char32_t next_code_point(std::string_view s, std::size_t& pos);

}  // namespace servelab
