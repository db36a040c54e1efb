// SPDX-License-Identifier: MIT
#include "tokenizer/byte_level.h"

#include <array>

#include "core/utf8.h"

namespace servelab {

namespace {

bool stands_for_itself(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

// GPT-2's bytes_to_unicode(): printable bytes keep their code point, the rest
// take U+0100 + n in byte order.
struct Alphabet {
  static constexpr char32_t kEnd = 0x100 + 68;  // one past the highest code point used
  std::array<char32_t, 256> code_point{};
  std::array<std::string, 256> utf8;
  std::array<std::int16_t, kEnd> byte;  // code point -> byte, -1 outside the alphabet
  Alphabet() {
    byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      code_point[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next++;
      append_utf8(utf8[b], code_point[b]);
      byte[code_point[b]] = static_cast<std::int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet table;
  return table;
}

}  // namespace

std::string_view byte_to_symbol(std::uint8_t b) { return alphabet().utf8[b]; }

int symbol_to_byte(char32_t cp) { return cp < Alphabet::kEnd ? alphabet().byte[cp] : -1; }

bool symbols_to_bytes(std::string_view token, std::string& bytes) {
  const std::size_t start = bytes.size();
  std::size_t pos = 0;
  while (pos < token.size()) {
    const int b = symbol_to_byte(next_code_point(token, pos));
    if (b < 0) {
      bytes.resize(start);
      return false;
    }
    bytes += static_cast<char>(b);
  }
  return true;
}

std::string bytes_to_symbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out.append(byte_to_symbol(static_cast<std::uint8_t>(c)));
  return out;
}

}  // namespace servelab
