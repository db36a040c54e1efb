// SPDX-License-Identifier: MIT
// GPT-2's byte-level alphabet: a bijection between bytes and 256 printable characters.
#include <set>

#include "test_util.h"
#include "tokenizer/byte_level.h"
#include "core/utf8.h"

using namespace servelab;

TEST_CASE("byte-level symbols: the well-known ones", "[tokenizer][byte-level]") {
  CHECK(byte_to_symbol(' ') == "\u0120");   // Ġ
  CHECK(byte_to_symbol('\n') == "\u010a");  // Ċ
  CHECK(byte_to_symbol('a') == "a");
  CHECK(byte_to_symbol(0x00) == "\u0100");                          // Ā, the first shifted byte
  CHECK(byte_to_symbol(0xAD) == "\u0143");                          // soft hyphen is not printable: shifted
  CHECK(byte_to_symbol(0xE9) == "\u00e9");                          // é stands for itself
  CHECK(bytes_to_symbols("\xed\x95\x9c") == "\u00ed\u0137\u013e");  // 한
}

TEST_CASE("byte-level symbols: every byte round-trips and no two bytes share a symbol", "[tokenizer][byte-level]") {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string_view s = byte_to_symbol(static_cast<std::uint8_t>(b));
    std::size_t pos = 0;
    CHECK(symbol_to_byte(next_code_point(s, pos)) == b);
    seen.emplace(s);
  }
  CHECK(seen.size() == 256);
  CHECK(symbol_to_byte(U' ') == -1);  // a space is spelled Ġ, never itself
  CHECK(symbol_to_byte(U'\u0144') == -1);
  std::string bytes;
  CHECK_FALSE(symbols_to_bytes("a b", bytes));
  CHECK(bytes.empty());
  CHECK(symbols_to_bytes("\u0120hi", bytes));
  CHECK(bytes == " hi");
}
