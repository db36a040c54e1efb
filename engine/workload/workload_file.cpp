// SPDX-License-Identifier: MIT
#include "workload/workload_file.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "workload/text.h"

namespace servelab {

namespace {

// A JSON value for a message, cut short: a 1 MB array must not become a 1 MB error line.
std::string brief(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() <= 40 ? s : s.substr(0, 37) + "...";
}

// j[key] as a token count in [1, kMaxWorkloadTokens].
int length_field(const nlohmann::json& j, const char* key, const std::string& where) {
  check(j.contains(key), where, ": missing field '", key, "'");
  const auto& v = j.at(key);
  check(v.is_number_integer(), where, ": field '", key, "' must be an integer number of tokens, got ", brief(v));
  // nlohmann keeps non-negative literals as unsigned and negative ones as signed: read each without wrapping.
  const bool positive = v.is_number_unsigned() ? v.get<std::uint64_t>() >= 1 : v.get<std::int64_t>() >= 1;
  check(positive, where, ": field '", key, "' must be >= 1, got ", brief(v));
  check(v.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxWorkloadTokens), where, ": field '", key,
        "' must be <= ", kMaxWorkloadTokens, " tokens, got ", brief(v));
  return static_cast<int>(v.get<std::uint64_t>());
}

WorkloadFileEntry parse_entry(std::string_view text, const std::string& where, int vocab_size) {
  nlohmann::json j;
  try {
    // The callback sees each object/array open with its depth (0 for the line itself): stop early.
    j = nlohmann::json::parse(text, [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
      const bool opens =
          event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start;
      if (opens && depth + 1 > kMaxWorkloadJsonDepth)
        fail(where, ": JSON nested deeper than ", kMaxWorkloadJsonDepth, " levels (expected one flat object)");
      return true;
    });
  } catch (const nlohmann::json::parse_error& e) {
    fail(where, ": not valid JSON (", e.what(), ")");
  }
  check(j.is_object(), where, ": expected a JSON object like {\"prompt_len\": 120, \"output_len\": 300}, got ",
        brief(j));
  WorkloadFileEntry e;
  const bool has_len = j.contains("prompt_len"), has_ids = j.contains("prompt_ids");
  check(has_len != has_ids, where,
        has_len ? ": has both fields 'prompt_len' and 'prompt_ids' (expected one)"
                : ": missing field 'prompt_len' (or 'prompt_ids')");
  if (has_len) {
    e.prompt_len = length_field(j, "prompt_len", where);
  } else {
    const auto& ids = j.at("prompt_ids");
    check(ids.is_array(), where, ": field 'prompt_ids' must be an array of token ids, got ", brief(ids));
    check(!ids.empty() && ids.size() <= static_cast<std::size_t>(kMaxWorkloadTokens), where,
          ": field 'prompt_ids' must hold 1 to ", kMaxWorkloadTokens, " ids, got ", ids.size());
    e.prompt_ids.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const auto& id = ids[i];
      // Unsigned literals only: a negative id is signed, and is_number_unsigned() is false for it.
      check(id.is_number_unsigned() && id.get<std::uint64_t>() < static_cast<std::uint64_t>(vocab_size), where,
            ": field 'prompt_ids[", i, "]' must be a token id in [0, ", vocab_size, "), got ", brief(id));
      e.prompt_ids.push_back(static_cast<std::int32_t>(id.get<std::uint64_t>()));
    }
    e.prompt_len = static_cast<int>(e.prompt_ids.size());
  }
  e.output_len = length_field(j, "output_len", where);
  if (j.contains("arrival")) {
    const auto& a = j.at("arrival");
    check(a.is_number() && std::isfinite(a.get<double>()) && a.get<double>() >= 0, where,
          ": field 'arrival' must be a number of seconds >= 0, got ", brief(a));
    e.arrival_s = a.get<double>();
  }
  return e;
}

}  // namespace

std::vector<WorkloadFileEntry> read_workload_file(const std::string& path, int vocab_size) {
  check(vocab_size >= 1, "workload file: vocab_size must be >= 1, got ", vocab_size);
  const std::string text = read_limited(path, "workload file");
  const auto lines = content_lines(text, path);
  check(!lines.empty(), path, ": no requests (expected one JSON object per line)");
  std::vector<WorkloadFileEntry> entries;
  entries.reserve(lines.size());
  for (const auto& [number, line] : lines) {
    entries.push_back(parse_entry(line, path + ":" + std::to_string(number), vocab_size));
    entries.back().line = number;
  }
  // Arrival times on some lines only would leave the rest undefined: all or none.
  const auto timed = std::find_if(entries.begin(), entries.end(), [](auto& e) { return e.arrival_s >= 0; });
  const auto untimed = std::find_if(entries.begin(), entries.end(), [](auto& e) { return e.arrival_s < 0; });
  if (timed != entries.end() && untimed != entries.end())
    fail(path, ":", untimed->line, ": missing field 'arrival' (line ", timed->line,
         " has one: give it on every line or on none)");
  return entries;
}

}  // namespace servelab
