// SPDX-License-Identifier: MIT
/**
 * @file checked.h
 * @brief Checked integer conversion for every number that comes from outside
 *        the program: JSON fields, command-line flags, token ids.
 *
 * A plain `static_cast<int>(v)` or `json.get<int>()` keeps the low bits of a
 * number that does not fit, so `hidden_size` 2^32 + 64 would silently run as
 * 64 and token id 2^32 + 1 as id 1. Every such conversion goes through
 * checked_int() instead, which either returns the same value in the narrower
 * type or throws an Error naming the field and the range it had to be in.
 */
#pragma once

#include <charconv>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace servelab {

/**
 * @brief @p value as a `To`, when it lies in [@p lo, @p hi].
 * @param what names the field or flag in the error, e.g. "config.json: field 'hidden_size'".
 * @throws Error "<what> must be an integer in [lo, hi], got <value>" otherwise.
 */
template <std::integral To, std::integral From>
To checked_int(From value, To lo, To hi, const std::string& what) {
  // std::cmp_* compare signed and unsigned values by their mathematical value.
  check(std::cmp_greater_equal(value, lo) && std::cmp_less_equal(value, hi), what, " must be an integer in [", +lo,
        ", ", +hi, "], got ", +value);
  return static_cast<To>(value);
}

/**
 * @brief Parses all of @p text as a base-10 integer in [@p lo, @p hi].
 *
 * No leading spaces, no '+', no trailing characters: "12x", "" and " 1" are
 * errors, so an empty flag never falls back to a default.
 * @param what names the flag or field in the error.
 * @throws Error naming @p what when @p text is not an integer or is out of range.
 */
template <std::integral T>
T parse_int(std::string_view text, T lo, T hi, const std::string& what) {
  // Parse into the widest type of the same signedness, so that an
  // out-of-range value is reported as such rather than as "not an integer".
  using Wide = std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>;
  Wide value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) fail(what, " must be an integer in [", +lo, ", ", +hi, "], got ", text);
  check(ec == std::errc() && ptr == end && !text.empty(), what, ": '", text, "' is not an integer");
  return checked_int<T>(value, lo, hi, what);
}

/// @p a * @p b, or nothing when the product does not fit in an int64 (shape products, byte counts).
inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

}  // namespace servelab
