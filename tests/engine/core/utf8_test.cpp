// SPDX-License-Identifier: MIT
// UTF-8 rules: U+FFFD substitution of maximal subparts (what tokenizers'
// decode does), validation errors that say where the bad byte is.
#include "core/error.h"
#include "core/utf8.h"
#include "test_util.h"

using namespace servelab;

namespace {
const std::string kFFFD(kReplacementChar);
}

TEST_CASE("valid UTF-8 of every length passes through unchanged", "[tokenizer][utf8]") {
  const std::string text = "a\u00e9\ud55c\U0001F600";  // 1, 2, 3 and 4 bytes
  CHECK(to_valid_utf8(text) == text);
  CHECK_NOTHROW(check_utf8(text, "text"));
  std::size_t pos = 0;
  CHECK(next_code_point(text, pos) == U'a');
  CHECK(next_code_point(text, pos) == U'\u00e9');
  CHECK(next_code_point(text, pos) == U'\ud55c');
  CHECK(next_code_point(text, pos) == U'\U0001F600');
  CHECK(pos == text.size());
}

TEST_CASE("each maximal invalid subpart becomes one U+FFFD", "[tokenizer][utf8]") {
  CHECK(to_valid_utf8("\xff") == kFFFD);
  CHECK(to_valid_utf8("a\xe2\x82") == "a" + kFFFD);               // a cut-off 3-byte character: one subpart
  CHECK(to_valid_utf8("\xed\xa0\x80") == kFFFD + kFFFD + kFFFD);  // a surrogate: ED is followed by A0, outside 80..9F
  CHECK(to_valid_utf8("\xc0\xaf") == kFFFD + kFFFD);              // an overlong '/'
  CHECK(to_valid_utf8("\xf0\x9f\xf0\x9f\x98\x80") == kFFFD + "\U0001F600");
  CHECK(to_valid_utf8("\x80x") == kFFFD + "x");
}

TEST_CASE("utf8_classify tells complete, incomplete and invalid apart", "[tokenizer][utf8]") {
  CHECK(utf8_classify("\xed\x95\x9c", 0) == 3);
  CHECK(utf8_classify("\xed\x95", 0) == 0);  // more bytes may still complete it
  CHECK(utf8_classify("\xed\x95x", 0) == -2);
  CHECK(utf8_classify("\xf5", 0) == -1);
}

TEST_CASE("check_utf8 names the input and the offset of the first bad byte", "[tokenizer][utf8][bad-input]") {
  REQUIRE_ERROR_MENTIONS(check_utf8("ok \xff", "--text"), "--text", "invalid UTF-8", "byte offset 3", "0xFF");
  REQUIRE_ERROR_MENTIONS(check_utf8("ab\xe2\x82", "prompt.txt"), "prompt.txt", "byte offset 2", "cut off");
}

TEST_CASE("append_utf8 is the inverse of next_code_point", "[tokenizer][utf8]") {
  for (char32_t cp : {U'\0', U'\x7f', U'\x80', U'\u07ff', U'\u0800', U'\uffff', U'\U00010000', U'\U0010FFFF'}) {
    std::string s;
    append_utf8(s, cp);
    std::size_t pos = 0;
    CHECK(next_code_point(s, pos) == cp);
    CHECK(pos == s.size());
  }
}
