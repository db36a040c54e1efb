// SPDX-License-Identifier: MIT
#include "core/json.h"

#include <algorithm>

#include "core/file.h"

namespace servelab {

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  // The callback sees each `[` or `{` with the number of containers around it,
  // before anything inside is parsed, so a deep file stops at level 64.
  const nlohmann::json::parser_callback_t limit_depth = [&](int depth, nlohmann::json::parse_event_t event,
                                                            nlohmann::json&) {
    if ((event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      fail(source, ": JSON nested deeper than ", kMaxJsonDepth, " levels (no file servelab reads needs more)");
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), limit_depth);
  } catch (const nlohmann::json::exception& e) {
    fail(source, ": not valid JSON (", e.what(), ")");
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what) {
  return parse_json(read_regular_file(path, kMaxJsonFileBytes, what), path.string());
}

std::string json_brief(const nlohmann::json& value) {
  // A short array of numbers (a shape, a pair of offsets) is shown as it is.
  if (value.is_array() && value.size() <= 8 && std::all_of(value.begin(), value.end(), [](const nlohmann::json& v) {
        return v.is_number() || v.is_boolean() || v.is_null();
      }))
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (value.is_array()) return "an array of " + std::to_string(value.size()) + " elements";
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " fields";
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    // dump() escapes the string; cut the escaped form so the message stays one short line.
    std::string quoted = nlohmann::json(s.substr(0, 80)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return s.size() > 80 ? quoted + "..." : quoted;
  }
  return value.dump();
}

}  // namespace servelab
