// SPDX-License-Identifier: MIT
/**
 * @file fuzz_tokenizer_json.cpp
 * @brief libFuzzer target: tokenizer.json through parse_json() and
 *        Tokenizer::from_json(); an accepted tokenizer also encodes a short
 *        text and decodes the ids back.
 */
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "core/json.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto json =
        servelab::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "tokenizer.json");
    const servelab::Tokenizer tok = servelab::Tokenizer::from_json(json, "tokenizer.json");
    const auto ids = tok.encode("Hello, world! 안녕 e\u0301 <|im_start|>", true);
    (void)tok.decode(ids);
  } catch (const servelab::Error&) {
  }
  return 0;
}
