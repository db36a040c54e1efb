// SPDX-License-Identifier: MIT
// A byte-level vocabulary without some single-byte tokens (SmolLM2 lacks 21 of
// 256) against Hugging Face tokenizers: it loads, and text that holds such a
// byte encodes and decodes to what tokenizers gives (the byte is dropped).
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_fixtures.h"

using namespace servelab;
using namespace servelab::test;

TEST_CASE("a vocabulary missing SmolLM2's byte tokens drops those bytes as tokenizers does", "[tokenizer][golden]") {
  const auto dir = tokenizer_fixtures() / "missing-bytes";
  const Tokenizer tok = Tokenizer::from_file(dir / "tokenizer.json");
  const auto ref = load_reference("tokenizer/missing-bytes");
  CHECK(tok.vocab_size() == ref["vocab_size"].get<int>());
  for (int b : ref["missing_bytes"].get<std::vector<int>>())
    CHECK_FALSE(tok.token_to_id(bytes_to_symbols(std::string(1, static_cast<char>(b)))).has_value());
  int dropped = 0;
  for (const auto& c : ref["corpus"]) {
    const std::string text = c["text"];
    INFO("text: " << c["text"].dump());
    const auto ids = tok.encode(text, false);
    CHECK(ids == c["ids"].get<std::vector<std::int32_t>>());
    CHECK(tok.decode(ids) == c["decoded"].get<std::string>());
    dropped += tok.decode(ids).size() < text.size();
  }
  CHECK(dropped >= 10);  // most strings hold a missing byte; the test would pass vacuously otherwise
}
