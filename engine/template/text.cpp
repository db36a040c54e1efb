// SPDX-License-Identifier: MIT
#include "template/text.h"

#include <algorithm>
#include <array>

#include "core/utf8.h"

namespace servelab::jinja {

bool is_python_space(char32_t c) {
  constexpr std::array<char32_t, 8> kOther = {0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || (c >= 0x2000 && c <= 0x200A)) return true;
  return std::find(kOther.begin(), kOther.end(), c) != kOther.end();
}

namespace {

std::vector<char32_t> decode(std::string_view s) {
  std::vector<char32_t> out;
  for (std::size_t pos = 0; pos < s.size();) out.push_back(next_code_point(s, pos));
  return out;
}

}  // namespace

std::string python_strip(std::string_view s, std::string_view chars, bool left, bool right) {
  const std::vector<char32_t> set = decode(chars);
  const auto strippable = [&](char32_t c) {
    return chars.empty() ? is_python_space(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  // Byte offsets of each code point, so the result is a substring of the input.
  std::vector<std::size_t> starts;
  std::vector<char32_t> cps;
  for (std::size_t pos = 0; pos < s.size();) {
    starts.push_back(pos);
    cps.push_back(next_code_point(s, pos));
  }
  std::size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strippable(cps[b])) ++b;
  if (right)
    while (e > b && strippable(cps[e - 1])) --e;
  if (b == e) return {};
  const std::size_t begin = starts[b], end = e < starts.size() ? starts[e] : s.size();
  return std::string(s.substr(begin, end - begin));
}

std::vector<std::string> python_split(std::string_view s, std::string_view sep, bool whitespace, long maxsplit) {
  std::vector<std::string> parts;
  if (whitespace) {
    std::size_t pos = 0;
    while (pos < s.size()) {
      std::size_t next = pos;
      if (is_python_space(next_code_point(s, next))) {
        pos = next;
        continue;
      }
      if (maxsplit >= 0 && static_cast<long>(parts.size()) == maxsplit) {
        parts.push_back(python_strip(s.substr(pos), {}, false, true));
        return parts;
      }
      std::size_t end = pos;
      while (end < s.size()) {
        std::size_t after = end;
        if (is_python_space(next_code_point(s, after))) break;
        end = after;
      }
      parts.emplace_back(s.substr(pos, end - pos));
      pos = end;
    }
    return parts;
  }
  if (sep.empty()) issue("split(): empty separator");
  std::size_t pos = 0;
  while (maxsplit < 0 || static_cast<long>(parts.size()) < maxsplit) {
    const std::size_t at = s.find(sep, pos);
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(pos, at - pos));
    pos = at + sep.size();
  }
  parts.emplace_back(s.substr(pos));
  return parts;
}

std::size_t code_points(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t pos = 0; pos < s.size();) next_code_point(s, pos), ++n;
  return n;
}

std::string python_case(std::string_view s, std::string_view how) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) >= 0x80)
      issue(how, "() of non-ASCII text is not supported (Python's Unicode case mapping is not implemented)");
  std::string out(s);
  const auto up = [](char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; };
  const auto down = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (how == "upper") {
    for (char& c : out) c = up(c);
  } else if (how == "lower") {
    for (char& c : out) c = down(c);
  } else if (how == "capitalize") {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = i == 0 ? up(out[i]) : down(out[i]);
  } else {  // title: a letter after a non-letter starts a word
    bool prev_letter = false;
    for (char& c : out) {
      c = prev_letter ? down(c) : up(c);
      prev_letter = letter(c);
    }
  }
  return out;
}

}  // namespace servelab::jinja
