// SPDX-License-Identifier: MIT
/**
 * @file enum_names.h
 * @brief One table of an enum's names, read both ways: to a name (tables, JSON, logs) and from a flag or
 *        wire field, so the two directions cannot drift apart and the error lists exactly the names accepted.
 */
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace servelab {

/// The names of enum @p E's values, e.g. `EnumNames<Mode, 2>{{{{Mode::A, "a"}, {Mode::B, "b"}}}}`.
template <typename E, std::size_t N>
struct EnumNames {
  std::array<std::pair<E, const char*>, N> entries;  ///< every value once, in the order the error lists them

  /// The name of @p value; "?" for a value outside the table (a cast from a bad integer).
  constexpr const char* name(E value) const {
    for (const auto& [e, n] : entries)
      if (e == value) return n;
    return "?";
  }

  /**
   * @brief The value named @p text, exactly.
   * @param what the flag or field, first in the error (e.g. "--attention").
   * @throws Error "<what> must be a, b or c, got '<text>'" when no name matches.
   */
  E parse(std::string_view text, const std::string& what) const {
    for (const auto& [e, n] : entries)
      if (text == n) return e;
    std::string choices;
    for (std::size_t i = 0; i < N; ++i)
      choices += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(entries[i].second);
    fail(what, " must be ", choices, ", got '", text, "'");
  }
};

}  // namespace servelab
