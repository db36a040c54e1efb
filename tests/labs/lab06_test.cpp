// SPDX-License-Identifier: MIT
// Grading tests of lab 06's own run (ctest -L lab06): the head-of-line
// experiment splits the long prompt over steps without changing a token, and
// the budget sweep serves the same tokens at every budget. No time is asserted.
#include "core/error.h"
#include "lab_runner.h"
#include "serve/ladder.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("lab 06 = lab 05 + chunked prefill: configure() differs in exactly its fields", "[lab06]") {
  CHECK(test::ladder_step(6) == test::Fields{"engine.scheduler.enable_chunked_prefill"});
}

TEST_CASE("lab 06 --quick splits the long prompt and keeps every token", "[lab06]") {
  test::ScratchDir out("lab06");
  const auto [r, dir, results] = test::run_lab_quick(LAB06_EXE, "06_chunked_prefill", out.path());
  // No chunking needs a budget a whole long prompt fits in; chunked runs at the --budgets value.
  // The run used the ladder: each side is configure() over the base it recorded, and they differ in the switch.
  CHECK(differences(test::ran(results, "head-of-line, no chunking", 5),
                    test::ran(results, "head-of-line, chunked, budget 128", 6)) ==
        test::Fields{"engine.scheduler.max_num_batched_tokens", "engine.scheduler.enable_chunked_prefill"});
  const auto& hol = test::table(results, "head_of_line");
  REQUIRE(hol["rows"].size() == 2);
  const auto prefill_steps = test::column(hol, "steps with prefill"), hash = test::column(hol, "tokens hash");
  CHECK(hol["rows"][0][prefill_steps] == 2);   // no chunking: each of the two 512-token prompts in one step
  CHECK(hol["rows"][1][prefill_steps] == 10);  // budget 128 beside 4 decodes: 124 + 124 + 124 + 124 + 16, twice
  CHECK(hol["rows"][0][hash] == hol["rows"][1][hash]);
  const auto& sweep = test::table(results, "budget_sweep");
  REQUIRE(sweep["rows"].size() == 2);
  CHECK(sweep["rows"][0][test::column(sweep, "tokens hash")] == sweep["rows"][1][test::column(sweep, "tokens hash")]);
  CHECK(std::filesystem::exists(dir / "head_of_line_steps.csv"));
  // The simulator: checked against the real sweep, then every GPU-scale row labelled simulated.
  CHECK(test::table(results, "calibration")["rows"].size() == 2);
  const auto& gpu = test::table(results, "gpu_simulated");
  REQUIRE(gpu["rows"].size() == 3);
  for (const auto& row : gpu["rows"]) CHECK(row[0].get<std::string>().find("(simulated)") != std::string::npos);
  // The rate sweep: both policies at six rates each, labelled simulated; the simulator's speed was timed.
  const auto& rates = test::table(results, "rate_sweep");
  REQUIRE(rates["rows"].size() == 12);
  for (const auto& row : rates["rows"]) CHECK(row[0].get<std::string>().find("(simulated)") != std::string::npos);
  const auto& speed = test::table(results, "simulator_speed");
  REQUIRE(speed["rows"].size() == 1);
  CHECK(speed["rows"][0][test::column(speed, "requests")] == 1000);
  CHECK(speed["rows"][0][test::column(speed, "simulated serving [s]")].get<double>() > 0);
}

TEST_CASE("lab 06 refuses bad flags with one error naming the flag", "[lab06]") {
  const std::string lab = LAB06_EXE;
  test::check_refused(lab + " --quick --budgets 0 --out /tmp", "--budgets");
  test::check_refused(lab + " --quick --long-prompt 100000 --out /tmp", "--long-prompt");
  test::check_refused(lab + " --quick --long-prompts 0 --out /tmp", "--long-prompts");
  test::check_refused(lab + " --quick --slo-tpot-ms 0 --out /tmp", "--slo-tpot-ms");
  test::check_refused(lab + " --quick --gpu B200 --out /tmp", "B200");
  test::check_refused(lab + " --quick --gpu-rate 0 --out /tmp", "--gpu-rate");
}
