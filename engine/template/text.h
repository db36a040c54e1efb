// SPDX-License-Identifier: MIT
/**
 * @file text.h
 * @brief Python's string rules that templates see (whitespace, strip,
 *        split), and the error a template operation raises.
 */
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace servelab::jinja {

/**
 * @brief An operation of a running template failed (a type error, a missing
 *        attribute, an unsupported method); the interpreter adds the
 *        template's name and line and rethrows it as servelab::Error.
 */
struct Issue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws an Issue whose message is the concatenation of @p parts.
template <typename... Parts>
[[noreturn]] void issue(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Issue(os.str());
}

/// Python's str.isspace() for one code point (what strip(), split() and `\s` remove).
bool is_python_space(char32_t c);

/// Python's s.strip(chars) / lstrip / rstrip; @p chars empty means whitespace.
std::string python_strip(std::string_view s, std::string_view chars = {}, bool left = true, bool right = true);
/// Python's s.rstrip().
inline std::string python_rstrip(std::string_view s) { return python_strip(s, {}, false, true); }

/// Python's s.split() (runs of whitespace, no empty parts) or s.split(sep, maxsplit).
std::vector<std::string> python_split(std::string_view s, std::string_view sep, bool whitespace, long maxsplit);

/// Number of code points (Python's len of a str).
std::size_t code_points(std::string_view s);

/**
 * @brief Python's upper(), lower(), title() or capitalize() of ASCII text.
 * @throws Issue when @p s has a non-ASCII letter (Python's full Unicode case
 *         mapping is not implemented, so such text is refused, not mis-cased).
 */
std::string python_case(std::string_view s, std::string_view how);

}  // namespace servelab::jinja
