// SPDX-License-Identifier: MIT
/**
 * @file fuzz_encode_decode.cpp
 * @brief libFuzzer target: arbitrary bytes as text to encode and as ids to
 *        decode (whole, and streamed token by token), with the fixture
 *        tokenizers (Qwen2-style with NFC, and Llama 3-style).
 *
 * The first byte picks the tokenizer; the rest is the input. Invariants
 * checked: encoding valid UTF-8 succeeds, every id is in the vocabulary, and
 * the streamed decode equals the whole decode.
 */
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

const servelab::Tokenizer& fixture(int which) {
  static const servelab::Tokenizer qwen =
      servelab::Tokenizer::from_file(SERVELAB_FIXTURES_DIR "/tokenizer/qwen2-style/tokenizer.json");
  static const servelab::Tokenizer llama =
      servelab::Tokenizer::from_file(SERVELAB_FIXTURES_DIR "/tokenizer/llama3-style/tokenizer.json");
  return which == 0 ? qwen : llama;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const servelab::Tokenizer& tok = fixture(data[0] & 1);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  // Encode: valid UTF-8 must encode, anything else must be an Error.
  bool valid = true;
  try {
    servelab::check_utf8(text, "fuzz");
  } catch (const servelab::Error&) {
    valid = false;
  }
  try {
    const auto ids = tok.encode(text, (data[0] & 2) != 0);
    if (!valid) __builtin_trap();
    for (std::int32_t id : ids)
      if (!tok.has_id(id)) __builtin_trap();
  } catch (const servelab::Error&) {
    if (valid) __builtin_trap();
  }

  // Decode: the same bytes as little-endian int32 ids, whole and streamed.
  std::vector<std::int32_t> ids((size - 1) / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data + 1, ids.size() * 4);
  try {
    const std::string whole = tok.decode(ids, /*skip_special_tokens=*/true);  // as the stream below
    servelab::StreamingDetokenizer stream(tok, true);
    std::string streamed;
    for (std::int32_t id : ids) streamed += stream.push(id);
    streamed += stream.finish();
    if (streamed != whole) __builtin_trap();
  } catch (const servelab::Error&) {
  }
  return 0;
}
