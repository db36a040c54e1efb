// SPDX-License-Identifier: MIT
/**
 * @file text_input.h
 * @brief What `generate` and `tokenize` read text with: the tokenizer a
 *        command uses, and UTF-8 text files.
 */
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "tokenizer/tokenizer.h"

namespace servelab::cli {

/// The tokenizer a command uses, and the folder its tokenizer_config.json, chat template and
/// generation_config.json are read from.
struct TextSide {
  Tokenizer tokenizer;               ///< from tokenizer.json
  std::filesystem::path config_dir;  ///< the folder beside it
};

/**
 * @brief --tokenizer FILE wins over the model folder's tokenizer.json; a preset has none.
 * @param why the flag or command that needs it, for the error.
 * @throws Error naming @p why when neither is given, or the tokenizer cannot be loaded.
 */
TextSide load_text_side(const std::string& tokenizer_file, const std::string& model_dir, const std::string& why);

/// The largest text file read_text_file() reads, bytes (far more text than any context holds).
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{64} << 20;

/// The bytes of UTF-8 text file @p path. @throws Error naming it when it is not a regular file, is larger
/// than kMaxTextFileBytes or cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace servelab::cli
