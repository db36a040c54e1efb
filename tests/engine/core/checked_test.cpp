// SPDX-License-Identifier: MIT
// Checked integer conversion and the safe JSON reader (core/checked.h,
// core/json.h): each case is one way a number or a nesting from outside used
// to be narrowed, wrapped or recursed on without a word.
#include <limits>

#include "core/checked.h"
#include "core/json.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("checked_int keeps values in range and names the field otherwise", "[checked][bad-input]") {
  CHECK(checked_int<int>(std::int64_t{64}, 0, 100, "f") == 64);
  CHECK(checked_int<std::int32_t>(std::uint64_t{2147483647}, 0, std::numeric_limits<std::int32_t>::max(), "f") ==
        2147483647);
  // 2^32 + 64 used to become 64.
  REQUIRE_ERROR_MENTIONS(checked_int<int>(std::int64_t{4294967360}, 0, std::numeric_limits<int>::max(), "hidden_size"),
                         "hidden_size must be an integer in [0, 2147483647], got 4294967360");
  REQUIRE_ERROR_MENTIONS(checked_int<unsigned>(-1, 0u, 10u, "n"), "n must be an integer in [0, 10], got -1");
}

TEST_CASE("parse_int takes the whole text or refuses it", "[checked][bad-input]") {
  CHECK(parse_int<std::int32_t>("9707", 0, 200000, "--prompt-ids") == 9707);
  // 4294967297 used to run as id 1.
  REQUIRE_ERROR_MENTIONS(
      parse_int<std::int32_t>("4294967297", 0, std::numeric_limits<std::int32_t>::max(), "--prompt-ids"),
      "--prompt-ids must be an integer in [0, 2147483647], got 4294967297");
  REQUIRE_ERROR_MENTIONS(parse_int<int>("99999999999999999999999", 0, 5, "--x"), "--x must be an integer in [0, 5]");
  for (const char* text : {"", "12x", " 1", "+1", "1.5", "0x10"}) {
    INFO("text '" << text << "'");
    REQUIRE_ERROR_MENTIONS(parse_int<int>(text, 0, 100, "--n"), "--n: '", "is not an integer");
  }
}

TEST_CASE("checked_mul reports int64 overflow", "[checked]") {
  CHECK(checked_mul(1 << 20, 1 << 20) == std::int64_t{1} << 40);
  CHECK_FALSE(checked_mul(std::int64_t{1} << 62, 4).has_value());
  CHECK_FALSE(checked_mul(std::numeric_limits<std::int64_t>::max(), 2).has_value());
}

TEST_CASE("parse_json refuses nesting deeper than 64 levels before anything recurses on it", "[json][bad-input]") {
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  CHECK(parse_json(nested(kMaxJsonDepth), "ok.json").is_array());
  REQUIRE_ERROR_MENTIONS(parse_json(nested(kMaxJsonDepth + 1), "deep.json"), "deep.json: JSON nested deeper than 64");
  // 100 000 levels: dump() or a recursive copy of this would overflow the stack.
  REQUIRE_ERROR_MENTIONS(parse_json(nested(100000), "deep.json"), "deep.json: JSON nested deeper than 64");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  REQUIRE_ERROR_MENTIONS(parse_json(objects, "objects.json"), "objects.json: JSON nested deeper than 64");
  REQUIRE_ERROR_MENTIONS(parse_json("{\"a\": 1,}", "comma.json"), "comma.json: not valid JSON");
}

TEST_CASE("json_int converts with a range check - json_brief never prints a whole container", "[json][bad-input]") {
  using nlohmann::json;
  CHECK(json_int<std::int32_t>(json(151643), 0, 1 << 22, "id") == 151643);
  REQUIRE_ERROR_MENTIONS(json_int<std::int32_t>(json(std::uint64_t{1} << 32), 0, 100, "ids"), "ids must be an integer",
                         "got 4294967296");
  REQUIRE_ERROR_MENTIONS(json_int<int>(json(-5), 0, 100, "n"), "got -5");
  REQUIRE_ERROR_MENTIONS(json_int<int>(json(1.5), 0, 100, "n"), "n must be an integer, got 1.5");
  REQUIRE_ERROR_MENTIONS(json_int<int>(json("7"), 0, 100, "n"), "n must be an integer, got \"7\"");
  CHECK(json_brief(json::array({896, 4864})) == "[896,4864]");
  CHECK(json_brief(json(std::vector<int>(100000, 1))) == "an array of 100000 elements");
  CHECK(json_brief(json{{"a", 1}}) == "an object of 1 fields");
  CHECK(json_brief(json(std::string(1000, 'x'))).size() < 100);
}
