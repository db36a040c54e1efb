// SPDX-License-Identifier: MIT
// Streaming detokenization: Korean and emoji cut across tokens never come out
// half-written, and the stream adds up to what decode() gives.
#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer_fixtures.h"

using namespace servelab;
using namespace servelab::test;

namespace {

Tokenizer fixture(const std::string& name) {
  return Tokenizer::from_file(tokenizer_fixtures() / name / "tokenizer.json");
}

// One single-byte token per byte of @p text: the worst case, every character split.
std::vector<std::int32_t> byte_tokens(const Tokenizer& tok, std::string_view text) {
  std::vector<std::int32_t> ids;
  for (char c : text) ids.push_back(*tok.token_to_id(byte_to_symbol(static_cast<std::uint8_t>(c))));
  return ids;
}

}  // namespace

TEST_CASE("streaming holds a character back until its last byte arrives", "[tokenizer][detokenizer]") {
  const Tokenizer tok = fixture("qwen2-style");
  StreamingDetokenizer stream(tok);
  const auto ids = byte_tokens(tok, "\ud55c\U0001F600!");  // 한 (3 bytes), 😀 (4 bytes), !
  const std::vector<std::string> expected = {"", "", "\ud55c", "", "", "", "\U0001F600", "!"};
  for (std::size_t i = 0; i < ids.size(); ++i) {
    INFO("after token " << i);
    CHECK(stream.push(ids[i]) == expected[i]);
  }
  CHECK(stream.finish().empty());
}

TEST_CASE("every piece streamed is valid UTF-8 and the pieces add up to decode()", "[tokenizer][detokenizer]") {
  // The small gpt2-style vocabulary cuts most Korean and emoji across tokens.
  for (const char* name : {"gpt2-style", "qwen2-style"}) {
    DYNAMIC_SECTION(name) {
      const Tokenizer tok = fixture(name);
      for (const auto& c : tokenizer_reference()[name]["corpus"]) {
        const auto ids = c["ids"].get<std::vector<std::int32_t>>();
        INFO("text: \"" << c["text"].get<std::string>() << "\"");
        StreamingDetokenizer stream(tok);
        std::string streamed;
        for (auto id : ids) {
          const std::string piece = stream.push(id);
          CHECK_NOTHROW(check_utf8(piece, "streamed piece"));
          streamed += piece;
        }
        streamed += stream.finish();
        CHECK(streamed == tok.decode(ids, true));
      }
    }
  }
}

TEST_CASE("bytes that can never be valid come out as U+FFFD at once, a cut tail at finish()",
          "[tokenizer][detokenizer]") {
  const Tokenizer tok = fixture("qwen2-style");
  StreamingDetokenizer stream(tok);
  const auto ids = byte_tokens(tok,
                               "\xff"
                               "a\xed\x95");
  CHECK(stream.push(ids[0]) == std::string(kReplacementChar));
  CHECK(stream.push(ids[1]) == "a");
  CHECK(stream.push(ids[2]).empty());
  CHECK(stream.push(ids[3]).empty());
  CHECK(stream.finish() == std::string(kReplacementChar));
}

TEST_CASE("special tokens are skipped in a reply, or shown and ending the byte run", "[tokenizer][detokenizer]") {
  const Tokenizer tok = fixture("qwen2-style");
  const std::int32_t end = *tok.token_to_id("<|im_end|>");
  auto ids = byte_tokens(tok, "\ud55c");
  ids.insert(ids.begin() + 2, end);  // 한's last byte comes after the special token
  StreamingDetokenizer skipping(tok, true), showing(tok, false);
  std::string skipped, shown;
  for (auto id : ids) skipped += skipping.push(id), shown += showing.push(id);
  skipped += skipping.finish();
  shown += showing.finish();
  CHECK(skipped == "\ud55c");
  CHECK(skipped == tok.decode(ids, true));
  CHECK(shown == tok.decode(ids, false));
  CHECK(shown == std::string(kReplacementChar) + "<|im_end|>" + std::string(kReplacementChar));
}

TEST_CASE("streaming an id the tokenizer lacks is an error naming it", "[tokenizer][detokenizer][bad-input]") {
  const Tokenizer tok = fixture("qwen2-style");
  StreamingDetokenizer stream(tok);
  REQUIRE_ERROR_MENTIONS(stream.push(99999), "token id 99999");
}
