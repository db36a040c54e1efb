// SPDX-License-Identifier: MIT
/**
 * @file byte_level.h
 * @brief GPT-2's byte-level alphabet: the reversible map from the 256 byte
 *        values to 256 printable characters in which byte-level BPE
 *        vocabularies (GPT-2, Qwen2, Llama 3) write their tokens.
 *
 * Printable Latin-1 bytes (`!`..`~`, `¡`..`¬`, `®`..`ÿ`) stand for
 * themselves; the other 68 bytes are shifted to U+0100 and up, in byte
 * order. So a space is `Ġ` (U+0120) and a newline is `Ċ` (U+010A), and every
 * byte string, valid UTF-8 or not, has a spelling in the vocabulary.
 */
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace servelab {

/// The character (as UTF-8, 1 or 2 bytes) that stands for byte @p b.
std::string_view byte_to_symbol(std::uint8_t b);

/// The byte that code point @p cp stands for, or -1 when @p cp is not in the alphabet.
int symbol_to_byte(char32_t cp);

/**
 * @brief Turns a token written in the byte-level alphabet back into its bytes.
 * @param token valid UTF-8 (a vocabulary entry).
 * @param[out] bytes receives the bytes (appended).
 * @return false, leaving @p bytes unchanged, when a character of @p token is not in the alphabet.
 */
bool symbols_to_bytes(std::string_view token, std::string& bytes);

/// @p bytes spelled in the byte-level alphabet (what a vocabulary entry looks like).
std::string bytes_to_symbols(std::string_view bytes);

}  // namespace servelab
