// SPDX-License-Identifier: MIT
// Grading tests of lab 07's own run (ctest -L lab07): tables (a)-(c) come from real
// router and worker processes, the bytes are the formula's, and bad flags are refused.
// No time is asserted.
#include "lab_runner.h"
#include "serve/ladder.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("lab 07 = lab 06 + disaggregation: configure() differs in exactly its fields", "[lab07]") {
  CHECK(test::ladder_step(7) == test::Fields{"disaggregated"});
}

TEST_CASE("lab 07 --quick prints five tables: (a)-(c) from real transfers, (d) and (e) simulated", "[lab07]") {
  test::ScratchDir out("lab07");
  const auto [r, dir, results] = test::run_lab_quick(LAB07_EXE, "07_disaggregation", out.path());
  // The run used the ladder: each side is configure() over the base it recorded, and they differ in the switch.
  CHECK(differences(test::ran(results, "colocated", 6), test::ran(results, "1P1D", 7)) ==
        test::Fields{"disaggregated"});
  const auto& a = test::table(results, "kv_bytes_per_request");
  REQUIRE(a["rows"].size() == 9);
  CHECK(a["rows"][4][test::column(a, "KV bytes")] == 268435456);  // llama-3-8b, 2,048 tokens
  CHECK(a["rows"][7][test::column(a, "KV bytes")] == 671088640);  // llama-3-70b, 2,048 tokens
  const auto& b = test::table(results, "measured_transfers");
  REQUIRE(b["rows"].size() == 11);
  // small: 4 layers, 2 KV heads of 32, f32; --quick moves 128-token prompts.
  for (const auto& row : b["rows"]) CHECK(row[test::column(b, "bytes")] == 2 * 4 * 2 * 32 * 128 * 4);
  const auto& c = test::table(results, "colocated_vs_disaggregated");
  CHECK(c["rows"].size() == 2 * 5);  // colocated and 1P1D for each of seed 001's five request patterns
  // The workers run the colocated engine's code: the verdict compares every request's tokens.
  CHECK_THAT(results["verdict"].get<std::string>(), Catch::Contains("1P1D gave the colocated engine's tokens for"));
  // (d): each real row of (c) replayed on the simulator, with its error.
  const auto& d = test::table(results, "simulator_check");
  REQUIRE(d["rows"].size() == 2 * 5);
  CHECK_THAT(d["note"].get<std::string>(), Catch::Contains("Calibration error"));
  // (e): seven fleets for each of the strategy table's four patterns, every one labelled simulated.
  const auto& e = test::table(results, "simulated_fleets");
  REQUIRE(e["rows"].size() == 7 * 4);
  CHECK_THAT(e["title"].get<std::string>(), Catch::Contains("Simulated"));
  for (const auto& row : e["rows"]) {
    const std::string fleet = row[test::column(e, "fleet (simulated)")];
    const bool colocated = fleet.starts_with("colocated");
    // A disaggregated fleet moves KV: its transfer column is a time; a colocated one moves none.
    CHECK(row[test::column(e, "KV transfer p50 [ms]")].is_number() == !colocated);
    CHECK(row[test::column(e, "goodput per GPU [req/s]")].get<double>() >= 0);
  }
}

TEST_CASE("lab 07 refuses bad flags with one error naming the flag", "[lab07]") {
  const std::string lab = LAB07_EXE;
  test::check_refused(lab + " --quick --prompt-len 0 --out /tmp", "--prompt-len");
  test::check_refused(lab + " --quick --rate 0 --out /tmp", "--rate");
  test::check_refused(lab + " --quick --slo-tpot-ms 0 --out /tmp", "--slo-tpot-ms");
  test::check_refused(lab + " --quick --sim-link carrier-pigeon --out /tmp", "--sim-link");
  test::check_refused(lab + " --quick --sim-gpu abacus --out /tmp", "--sim-gpu");
}
