// SPDX-License-Identifier: MIT
#include "core/utf8.h"

#include <cstdint>
#include <cstdio>

#include "core/error.h"

namespace servelab {

int utf8_classify(std::string_view s, std::size_t pos) {
  const auto b0 = static_cast<std::uint8_t>(s[pos]);
  if (b0 < 0x80) return 1;
  // Unicode table 3-7, one row per run of lead bytes: how many continuation bytes follow, and the range
  // the first of them must fall in. The narrowed ranges after E0, ED, F0 and F4 exclude overlong forms,
  // surrogates and code points above U+10FFFF. A byte in no row (a stray continuation byte, C0/C1 or
  // F5..FF) never starts a character.
  struct Lead {
    std::uint8_t first, last;
    int need;
    std::uint8_t lo, hi;
  };
  static constexpr Lead kLeads[] = {{0xC2, 0xDF, 1, 0x80, 0xBF}, {0xE0, 0xE0, 2, 0xA0, 0xBF},
                                    {0xE1, 0xEC, 2, 0x80, 0xBF}, {0xED, 0xED, 2, 0x80, 0x9F},
                                    {0xEE, 0xEF, 2, 0x80, 0xBF}, {0xF0, 0xF0, 3, 0x90, 0xBF},
                                    {0xF1, 0xF3, 3, 0x80, 0xBF}, {0xF4, 0xF4, 3, 0x80, 0x8F}};
  const Lead* lead = nullptr;
  for (const Lead& l : kLeads)
    if (b0 >= l.first && b0 <= l.last) lead = &l;
  if (lead == nullptr) return -1;
  const int need = lead->need;
  std::uint8_t lo = lead->lo, hi = lead->hi;
  for (int i = 1; i <= need; ++i) {
    if (pos + i >= s.size()) return 0;
    const auto b = static_cast<std::uint8_t>(s[pos + i]);
    if (b < lo || b > hi) return -i;
    lo = 0x80, hi = 0xBF;
  }
  return need + 1;
}

std::string to_valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const int n = utf8_classify(bytes, pos);
    if (n > 0) {
      out.append(bytes.substr(pos, n));
      pos += n;
    } else {
      // A truncated tail (n == 0) is one maximal subpart running to the end.
      out.append(kReplacementChar);
      pos = n == 0 ? bytes.size() : pos - n;
    }
  }
  return out;
}

void check_utf8(std::string_view text, const std::string& what) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const int n = utf8_classify(text, pos);
    if (n <= 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(static_cast<std::uint8_t>(text[pos])));
      fail(what, ": invalid UTF-8 at byte offset ", pos, " (", hex, n == 0 ? ", a character cut off at the end" : "",
           "); expected UTF-8 text");
    }
    pos += n;
  }
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

char32_t next_code_point(std::string_view s, std::size_t& pos) {
  const auto b0 = static_cast<std::uint8_t>(s[pos++]);
  if (b0 < 0x80) return b0;
  const int extra = b0 >= 0xF0 ? 3 : b0 >= 0xE0 ? 2 : 1;
  char32_t cp = b0 & (0x3F >> extra);
  for (int i = 0; i < extra; ++i) cp = (cp << 6) | (static_cast<std::uint8_t>(s[pos++]) & 0x3F);
  return cp;
}

}  // namespace servelab
