// SPDX-License-Identifier: MIT
/**
 * @file error.h
 * @brief The one error type the engine throws for bad input or failed I/O.
 *
 * Every message names the thing at fault (file, tensor, field or flag) and
 * what was expected, so the command-line front ends can print it as-is and
 * exit non-zero.
 */
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace servelab {

/// Bad input, failed I/O or a violated precondition that a user can fix.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/**
 * @brief A part of a lab a student has still to write: what a starter tree's
 *        stub throws (core/not_implemented.h). An Error, so front ends print
 *        it as any; a lab that checks itself against a later lab's code
 *        catches it to skip that check rather than fail.
 */
class NotImplemented : public Error {
 public:
  using Error::Error;
};

/**
 * @brief Throws an Error whose message is the concatenation of @p parts.
 * @param parts anything with an `operator<<` to std::ostream.
 */
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(os.str());
}

/**
 * @brief Throws an Error built from @p parts unless @p condition holds.
 * @param condition the expectation.
 * @param parts the message, naming what was expected.
 */
template <typename... Parts>
void check(bool condition, const Parts&... parts) {
  if (!condition) fail(parts...);
}

}  // namespace servelab
