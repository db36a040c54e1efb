// SPDX-License-Identifier: MIT
// Grading tests of lab 07's own run (ctest -L lab07): tables (b)-(c) come from real
// router and worker processes, the bytes are the formula's, the simulated tables and
// the claims on them hold, and bad flags are refused. No time is asserted.
#include <algorithm>
#include <set>

#include "lab_runner.h"
#include "serve/ladder.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("lab 07 = lab 06 + disaggregation: configure() differs in exactly its fields", "[lab07]") {
  CHECK(test::ladder_step(7) == test::Fields{"disaggregated"});
}

// The claim @p id of @p results; fails the test when the run did not record it.
const nlohmann::json& claim(const nlohmann::json& results, const std::string& id) {
  const auto& claims = results["claims"];
  const auto it = std::find_if(claims.begin(), claims.end(), [&](const auto& c) { return c["id"] == id; });
  INFO(id);
  REQUIRE(it != claims.end());
  return *it;
}

TEST_CASE("lab 07 --quick prints its tables: (b)-(c) from real transfers, (d)-(h) simulated, and its claims",
          "[lab07]") {
  test::ScratchDir out("lab07");
  const auto [r, dir, results] = test::run_lab_quick(LAB07_EXE, "07_disaggregation", out.path());
  CHECK(test::rung_step(results, {"colocated", 6}, {"1P1D", 7}) == test::Fields{"disaggregated"});
  const auto& a = test::table(results, "kv_bytes_per_request");
  REQUIRE(a["rows"].size() == 9);
  CHECK(a["rows"][4][test::column(a, "KV bytes")] == 268435456);  // llama-3-8b, 2,048 tokens
  CHECK(a["rows"][7][test::column(a, "KV bytes")] == 671088640);  // llama-3-70b, 2,048 tokens
  const auto& b = test::table(results, "measured_transfers");
  REQUIRE(b["rows"].size() == 11);
  // small: 4 layers, 2 KV heads of 32, f32; --quick moves 128-token prompts.
  for (const auto& row : b["rows"]) CHECK(row[test::column(b, "bytes")] == 2 * 4 * 2 * 32 * 128 * 4);
  // The prefill beside the transfer: Llama-3-8B's 2,048-token prefill on the H100 roofline outlasts its HDR transfer.
  CHECK(a["rows"][4][test::column(a, "prefill [ms]")] > a["rows"][4][test::column(a, "ib-hdr [ms]")]);
  const auto& c = test::table(results, "colocated_vs_disaggregated");
  CHECK(c["rows"].size() == 2 * 5);  // colocated and 1P1D for each of the article's five request patterns
  CHECK(c["rows"][0][test::column(c, "TTFT p50 range")].is_string());  // min-max over the runs
  // The workers run the colocated engine's code: the verdict compares every request's tokens.
  CHECK_THAT(results["verdict"].get<std::string>(), Catch::Contains("1P1D gave the colocated engine's tokens for"));
  // (d): each real row of (c) replayed on the simulator, with its error.
  const auto& d = test::table(results, "simulator_check");
  REQUIRE(d["rows"].size() == 2 * 5);
  CHECK_THAT(d["note"].get<std::string>(), Catch::Contains("Calibration error"));
  // (e): ten fleets for each of the strategy table's four patterns, every one labelled simulated; continuous
  // batching and chunked prefill are different colocated configurations.
  const auto& e = test::table(results, "simulated_fleets");
  REQUIRE(e["rows"].size() == 10 * 4);
  CHECK_THAT(e["title"].get<std::string>(), Catch::Contains("Simulated"));
  std::set<std::string> fleets;
  for (const auto& row : e["rows"]) {
    const std::string fleet = row[test::column(e, "fleet (simulated)")];
    fleets.insert(fleet);
    const bool colocated = fleet.starts_with("colocated");
    // A disaggregated fleet moves KV: its transfer column is a time; a colocated one moves none.
    CHECK(row[test::column(e, "KV transfer p50 [ms]")].is_number() == !colocated);
    CHECK(row[test::column(e, "goodput per GPU [req/s]")].get<double>() >= 0);
  }
  CHECK(fleets.count("colocated x2, continuous batching") == 1);
  CHECK(fleets.count("colocated x2, chunked prefill") == 1);
  // (f): 1P1D on every (prefill GPU, decode GPU) pair of A100/H100/H200, then colocated pairs of each.
  const auto& f = test::table(results, "gpu_upgrades");
  REQUIRE(f["rows"].size() == 9 + 3);
  // Rows 0..8 are prefill-major: the same decode GPU gives the same TPOT whichever GPU prefilled (simulated).
  const auto tpot = [&](int row) { return f["rows"][row][test::column(f, "TPOT p50 [ms]")].get<double>(); };
  for (int gpu = 0; gpu < 3; ++gpu) CHECK(tpot(gpu) == Approx(tpot(3 + gpu)).epsilon(0.02));
  CHECK_THAT(test::table(results, "summarisation_walkthrough")["title"].get<std::string>(),
             Catch::Contains("8,000-token"));
  REQUIRE(test::table(results, "paper_numbers")["rows"].size() == 4);
  // Every claim has its numbers, and a cause where it did not hold.
  REQUIRE(results["claims"].size() >= 13);
  for (const auto& x : results["claims"]) {
    INFO(x["id"]);
    CHECK(!x["evidence"].get<std::string>().empty());
    CHECK((x["held"].get<bool>() || !x["cause"].get<std::string>().empty()));
  }
  // The computed and simulated claims are the same on every machine.
  for (const char* id : {"07.upgrade_decode_moves_tpot", "07.upgrade_prefill_moves_ttft",
                         "07.bandwidth_upgrade_helps_decode_only", "07.agrees_with_lab03",
                         "07.walkthrough_transfer_below_prefill", "07.transfer_share_larger_for_short_prompts"}) {
    INFO(id);
    CHECK(claim(results, id)["held"] == true);
  }
  // At line rate the transfer never dominates a 512-token prefill: the lab says so, and why.
  CHECK(claim(results, "07.transfer_dominates_short_prompts")["held"] == false);
  // The real claims of (c) are recorded, whichever way they went on this machine.
  CHECK(claim(results, "07.split_pays_here")["evidence"].get<std::string>().find("TPOT p50") != std::string::npos);
  CHECK(claim(results, "07.split_evens_decode_steps")["source"].get<std::string>().find("article") !=
        std::string::npos);
  // The plot renders from this JSON where matplotlib is installed (plot_lab.py exits 77 where it is not).
  const std::filesystem::path json = dir / "07_disaggregation.json";
  const auto plot = test::run_command("'" SERVELAB_PLOT_PYTHON "' '" SERVELAB_PLOT_SCRIPT "' '" + json.string() + "'");
  if (plot.status == 77 || plot.status == 127)
    WARN("python3 or matplotlib missing: the plot was not drawn");
  else {
    CHECK(plot.status == 0);
    CHECK(std::filesystem::file_size(dir / "transfer_vs_prefill.png") > 0);
  }
}

TEST_CASE("lab 07 refuses bad flags with one error naming the flag", "[lab07]") {
  test::check_flags_refused(LAB07_EXE, {"--prompt-len 0", "--rate 0", "--slo-tpot-ms 0", "--sim-link carrier-pigeon",
                                        "--sim-gpu abacus", "--sim-decode-gpu abacus", "--serving-repeats 0"});
}
