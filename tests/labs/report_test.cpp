// SPDX-License-Identifier: MIT
// The lab harness's checked claims: what a verdict is made of (labs/common/report.h). Not graded:
// the harness is not the student's code.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "report.h"

using servelab::Error;
using servelab::lab::Claim;
using servelab::lab::Report;
using servelab::lab::Table;

TEST_CASE("a claim that did not hold must say why, ids are unique, and the JSON keeps every field") {
  const auto out = std::filesystem::temp_directory_path() / "servelab_report_test";
  std::filesystem::remove_all(out);
  Report report("99_test", out);
  report.claim({.id = "99.held",
                .source = "this lab",
                .statement = "a is smaller than b",
                .held = true,
                .evidence = "a = 1, b = 2"});
  CHECK_THROWS_AS(report.claim({.id = "99.missed", .statement = "c is smaller than d", .held = false}), Error);
  CHECK_THROWS_AS(report.claim({.id = "99.held", .statement = "again", .held = true}), Error);
  CHECK_THROWS_AS(report.claim({.id = "", .statement = "no id", .held = true}), Error);
  report.claim({.id = "99.missed",
                .source = "article",
                .statement = "c is smaller than d",
                .held = false,
                .evidence = "c = 4, d = 3",
                .cause = "d was measured on a busy core"});
  REQUIRE(report.claims().size() == 2);

  std::ifstream in(report.save());
  const auto j = nlohmann::json::parse(in);
  REQUIRE(j["claims"].size() == 2);
  CHECK(j["claims"][0]["id"] == "99.held");
  CHECK(j["claims"][0]["held"] == true);
  CHECK(j["claims"][1]["held"] == false);
  CHECK(j["claims"][1]["evidence"] == "c = 4, d = 3");
  CHECK(j["claims"][1]["cause"] == "d was measured on a busy core");
  CHECK(j["claims"][1]["source"] == "article");
  std::filesystem::remove_all(out);
}

TEST_CASE("a printed table pads by terminal columns, so cells holding a dash or Korean line up") {
  CHECK(servelab::lab::display_width("abc") == 3);
  CHECK(servelab::lab::display_width("\u2014") == 1);              // "—": 3 bytes, one column
  CHECK(servelab::lab::display_width("\uD504\uB9AC\uD544") == 6);  // "프리필": 9 bytes, two columns each
  Table t{.name = "t", .title = "T", .columns = {{"term"}, {"value", 1}}};
  t.add_row({std::string("\u2014"), 1.0});
  t.add_row({std::string("\uD504\uB9AC\uD544"), 22.5});
  t.add_row({std::string("prefill"), 3.0});
  std::ostringstream os;
  t.print_markdown(os);
  std::istringstream lines(os.str());
  std::string line;
  std::vector<std::size_t> widths;
  while (std::getline(lines, line))
    if (line.rfind("|", 0) == 0) widths.push_back(servelab::lab::display_width(line));
  REQUIRE(widths.size() == 5);  // header, rule, three rows
  for (std::size_t w : widths) CHECK(w == widths[0]);
}
