// SPDX-License-Identifier: MIT
#include "text_input.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/pretrained.h"

namespace servelab::cli {

TextSide load_text_side(const std::string& tokenizer_file, const std::string& model_dir, const std::string& why) {
  if (!tokenizer_file.empty())
    return {Tokenizer::from_file(tokenizer_file), std::filesystem::path(tokenizer_file).parent_path()};
  check(!model_dir.empty(), why,
        " needs a tokenizer, and a --preset has none: use --model DIR (with tokenizer.json) or --tokenizer FILE");
  return {load_tokenizer(model_dir), model_dir};
}

std::string read_text_file(const std::string& path) {
  // A folder opens as a stream on Linux and reads as nothing: refuse it by name.
  check(!std::filesystem::is_directory(path), path, ": is a directory (expected a UTF-8 text file)");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), path, ": cannot open (expected a UTF-8 text file)");
  std::ostringstream text;
  text << in.rdbuf();
  check(!in.bad(), path, ": cannot read");
  return text.str();
}

}  // namespace servelab::cli
