// SPDX-License-Identifier: MIT
/**
 * @file text.h
 * @brief Reading the texts a workload comes from: numbers in flag values
 *        (`lognormal:98:1`, `poisson:2.5`), and the lines of a workload or
 *        trace file, each read with its limit checked first (workload/limits.h).
 *
 * Numbers go through std::from_chars: no locale, no leading '+' or spaces, and
 * the whole text must be the number.
 */
#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/error.h"

namespace servelab {

/// The whole of @p text as a T, or nothing.
template <typename T>
std::optional<T> to_number(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

/// @p text cut at every @p sep (`a::b` gives "a", "", "b"; "" gives one empty part).
std::vector<std::string_view> split_at(std::string_view text, char sep);

/// Shortest text that reads back as the same double (98, 0.8, 2.5).
std::string shortest_text(double v);

/// A flag's value being read: every error names the flag, the text and the expected spelling.
struct FlagText {
  std::string_view flag;      ///< e.g. `--prompt-len-dist`
  std::string_view text;      ///< the value given
  std::string_view expected;  ///< the spellings accepted, for the message

  /// @throws Error ``FLAG 'TEXT': WHY (expected EXPECTED)``, always.
  template <typename... Why>
  [[noreturn]] void bad(const Why&... why) const {
    fail(flag, " '", text, "': ", why..., " (expected ", expected, ")");
  }
  /// @p part as a token count in [1, kMaxWorkloadTokens]; @p name names it in the error.
  int integer(std::string_view part, const char* name) const;
  /// @p part as a number (any double); @p name names it in the error.
  double real(std::string_view part, const char* name) const;
};

/**
 * @brief The bytes of the file at @p path, its size checked against
 *        kMaxWorkloadFileBytes before anything is allocated.
 * @param what names the file in errors ("workload file", "arrival trace").
 * @throws Error naming @p path for a missing, unreadable or too large file.
 */
std::string read_limited(const std::string& path, const char* what);

/**
 * @brief The non-blank lines of @p text with their 1-based numbers (a trailing
 *        '\\r' dropped), at most kMaxWorkloadRequests of them.
 * @throws Error naming `path:line` at the first line over the limit.
 */
std::vector<std::pair<int, std::string_view>> content_lines(std::string_view text, const std::string& path);

}  // namespace servelab
