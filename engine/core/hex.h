// SPDX-License-Identifier: MIT
/**
 * @file hex.h
 * @brief Bytes as lower-case hex text and back, for opaque binary blobs
 *        (UCX worker addresses, packed remote keys) carried in JSON messages.
 */
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace servelab {

/// @p bytes as two lower-case hex digits each.
inline std::string to_hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::byte b : bytes) {
    out += kDigits[static_cast<unsigned>(b) >> 4];
    out += kDigits[static_cast<unsigned>(b) & 15];
  }
  return out;
}

/**
 * @brief The bytes that to_hex() wrote.
 * @param what names the field in the error.
 * @throws Error naming @p what when @p text has an odd length or a character that is not a hex digit.
 */
inline std::vector<std::byte> from_hex(std::string_view text, const std::string& what) {
  check(text.size() % 2 == 0, what, ": hex text of odd length ", text.size());
  const auto digit = [&](char c) -> unsigned {
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<unsigned>(c - 'A' + 10);
    fail(what, ": '", c, "' is not a hex digit");
  };
  std::vector<std::byte> out(text.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::byte>(digit(text[2 * i]) << 4 | digit(text[2 * i + 1]));
  return out;
}

}  // namespace servelab
