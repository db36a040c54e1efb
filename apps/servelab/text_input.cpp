// SPDX-License-Identifier: MIT
#include "text_input.h"

#include "core/error.h"
#include "core/file.h"
#include "model/pretrained.h"

namespace servelab::cli {

TextSide load_text_side(const std::string& tokenizer_file, const std::string& model_dir, const std::string& why) {
  if (!tokenizer_file.empty())
    return {Tokenizer::from_file(tokenizer_file), std::filesystem::path(tokenizer_file).parent_path()};
  check(!model_dir.empty(), why,
        " needs a tokenizer, and a --preset has none: use --model DIR (with tokenizer.json) or --tokenizer FILE");
  return {load_tokenizer(model_dir), model_dir};
}

std::string read_text_file(const std::string& path) {
  // A folder, a FIFO or /dev/zero is refused by name; a text to tokenize is bounded so it cannot exhaust memory.
  return read_regular_file(path, kMaxTextFileBytes, "a UTF-8 text file");
}

}  // namespace servelab::cli
