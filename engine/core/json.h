// SPDX-License-Identifier: MIT
/**
 * @file json.h
 * @brief Reading JSON that comes from outside (config.json, tokenizer.json,
 *        safetensors headers and indexes, generation_config.json) safely.
 *
 * Three hazards, one place each:
 * - nesting: a file of 100 000 `[` parses (nlohmann's parser is iterative)
 *   but every recursive walk afterwards, `dump()` included, overflows the
 *   stack. parse_json() refuses anything nested deeper than kMaxJsonDepth;
 * - numbers: json_int() converts with a range check (core/checked.h);
 * - error messages: json_brief() shows a value without dumping a huge one.
 */
#pragma once

#include <concepts>
#include <cstdint>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/checked.h"
#include "core/error.h"

namespace servelab {

/// Deepest nesting of arrays and objects accepted; the files servelab reads need 6 at most.
inline constexpr int kMaxJsonDepth = 64;

/// The largest JSON file read_json_file() reads (a large tokenizer.json is tens of MB), bytes.
inline constexpr std::size_t kMaxJsonFileBytes = std::size_t{512} << 20;

/**
 * @brief Parses @p text as JSON with at most kMaxJsonDepth levels of nesting.
 * @param source names the file in errors.
 * @throws Error "<source>: not valid JSON (...)" or "<source>: JSON nested
 *         deeper than 64 levels".
 */
nlohmann::json parse_json(std::string_view text, const std::string& source);

/**
 * @brief Reads and parses a whole JSON file (see parse_json()).
 * @param what describes the file in the "cannot open" error, e.g. "a Hugging Face config.json".
 * @throws Error naming the file when it cannot be read or is not valid JSON.
 */
nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what);

/// @p value for an error message: scalars in full (strings cut at 80 bytes), containers by type and size only.
std::string json_brief(const nlohmann::json& value);

/**
 * @brief @p value as an integer of type T in [@p lo, @p hi].
 * @param what names the field, e.g. "tokenizer.json: added_tokens[3].id".
 * @throws Error naming @p what when @p value is not an integer or is out of range.
 */
template <std::integral T>
T json_int(const nlohmann::json& value, T lo, T hi, const std::string& what) {
  check(value.is_number_integer(), what, " must be an integer, got ", json_brief(value));
  if (value.is_number_unsigned()) return checked_int<T>(value.get<std::uint64_t>(), lo, hi, what);
  return checked_int<T>(value.get<std::int64_t>(), lo, hi, what);
}

}  // namespace servelab
