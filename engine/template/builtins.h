// SPDX-License-Identifier: MIT
/**
 * @file builtins.h
 * @brief jinja2's filters, tests and the Python methods chat templates call,
 *        with Python's results (e.g. `|items` is a generator: always truthy,
 *        iterable once).
 */
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "template/value.h"

namespace servelab::jinja {

/// Whether `x | name` is implemented.
bool has_filter(std::string_view name);
/// Whether `x is name` is implemented.
bool has_test(std::string_view name);

/**
 * @brief Whether jinja2 itself has the filter (or, with @p test, the test) @p name.
 *
 * The parser refuses a filter jinja2 has and servelab lacks at once. One
 * that jinja2 lacks too fails in jinja2 only when reached (jinja2 3 defers
 * unknown filters and tests in branches to run time), so servelab defers it
 * the same way and a template that never reaches it still renders.
 */
bool jinja2_has(std::string_view name, bool test);

/**
 * @brief `value | name(args)`.
 * @throws Issue on arguments or a value the filter does not take.
 */
Value apply_filter(std::string_view name, const Value& value, const Args& args);

/**
 * @brief `value is name(args)`.
 * @throws Issue on arguments the test does not take.
 */
bool apply_test(std::string_view name, const Value& value, const Args& args);

/**
 * @brief `object.name(args)`: str, dict and list methods (strip, split, items, get, ...).
 * @throws Issue naming the method when the object's type has no such method here.
 */
Value call_method(const Value& object, const std::string& name, const Args& args);

/// Whether @p name is a method call_method() implements for @p object's type.
bool has_method(const Value& object, std::string_view name);

/**
 * @brief The items a `for` loop visits: a list's items, a dict's keys, a
 *        string's characters; undefined visits nothing. Consumes a generator.
 * @throws Issue for a value that is not iterable.
 */
std::vector<Value> iterate(const Value& v);

/// Python's a < b for numbers and strings (and lists of them).
bool less_than(const Value& a, const Value& b);

}  // namespace servelab::jinja
