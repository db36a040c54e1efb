// SPDX-License-Identifier: MIT
// Grading tests of lab 05 (ctest -L lab05), the lab's own run and the
// engine with flash on: the ladder's switch, the tables of a --quick run,
// the model's tokens under flash in deterministic mode. The kernel tests of
// the same label (every version against v0, split-K, paged, deterministic)
// live in tests/engine/kernels/flash_attention_test.cpp, compiled in here.
#include "core/error.h"
#include "kernels/attention_traffic.h"
#include "lab_runner.h"
#include "model/model.h"
#include "serve/generate.h"
#include "serve/ladder.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("lab 05 = lab 04 + flash attention: configure() differs in exactly its fields", "[lab05]") {
  CHECK(test::ladder_step(5) == test::Fields{"model.attention"});
}

namespace {

/// The --quick run, once for all the sections that read it (a section re-enters its test case).
const test::QuickRun& quick_run() {
  static test::ScratchDir out("lab05");
  static const test::QuickRun run = test::run_lab_quick(LAB05_EXE, "05_flash_attention", out.path());
  return run;
}

/// The claim @p id of @p results; fails the test when the lab did not record it.
nlohmann::json claim(const nlohmann::json& results, const std::string& id) {
  for (const auto& c : results["claims"])
    if (c["id"] == id) return c;
  FAIL("claim " << id << " was not recorded");
  return {};
}

/// Cell @p header of the prefill row of version @p version at length @p L, as a number.
double prefill_cell(const nlohmann::json& prefill, long long L, const std::string& version, const std::string& header) {
  const auto l = test::column(prefill, "L"), v = test::column(prefill, "version"), c = test::column(prefill, header);
  for (const auto& row : prefill["rows"])
    if (row[l] == L && row[v] == version)
      return row[c].is_string() ? std::stod(row[c].get<std::string>()) : row[c].get<double>();
  FAIL("no prefill row for " << version << " at L = " << L);
  return 0;
}

}  // namespace

TEST_CASE("lab 05 --quick validates every version and keeps lab 04's tokens", "[lab05]") {
  const auto& [r, dir, results] = quick_run();
  SECTION("tables") {
    CHECK(test::rung_step(results, {"serving, lab 04", 4}, {"serving, flash", 5}) == test::Fields{"model.attention"});
    // Prefill: six versions at L = 256 (v0 timed), five at 1,024 (v0 checks the last rows untimed), none left out.
    const auto& prefill = test::table(results, "prefill");
    CHECK(prefill["rows"].size() == 11);
    // Flash counts fewer bytes than blocked and both standard kernels at every L.
    for (long long L : {256, 1024})
      for (const char* other : {"v1 standard", "v1 standard, causal", "v2 blocked"})
        CHECK(prefill_cell(prefill, L, "v3 flash", "bytes [MiB]") < prefill_cell(prefill, L, other, "bytes [MiB]"));
    CHECK(test::table(results, "head_shapes")["rows"].size() == 5);
    CHECK(test::table(results, "decode")["rows"].size() == 10);
    // Serving: blocked and flash give one tokens hash.
    const auto& serving = test::table(results, "serving");
    REQUIRE(serving["rows"].size() == 2);
    const auto hash = test::column(serving, "tokens hash");
    CHECK(serving["rows"][0][hash] == serving["rows"][1][hash]);
    CHECK(r.err.find("failed validation") == std::string::npos);
    for (const char* csv :
         {"prefill.csv", "prefill_time.csv", "prefill_bytes.csv", "head_shapes.csv", "decode.csv", "serving.csv"})
      CHECK(std::filesystem::exists(dir / csv));
  }
  SECTION("the equal-work baseline executes flash's FLOPs and the full-matrix v1 about twice") {
    const auto& prefill = test::table(results, "prefill");
    // Tolerance: the cells are GFLOP printed with full precision in the JSON; the counts are equal integers, so
    // only the last digit of a double may differ.
    for (long long L : {256, 1024}) {
      INFO("L = " << L);
      const double flash = prefill_cell(prefill, L, "v3 flash", "GFLOP done");
      CHECK(prefill_cell(prefill, L, "v1 standard, causal", "GFLOP done") == Approx(flash).epsilon(1e-12));
      // One 256-query tile at L = 256: v3 computes the whole square too; at 1,024 the full matrix is 2/(1 + 256/L).
      CHECK(prefill_cell(prefill, L, "v1 standard", "GFLOP done") ==
            Approx(flash * 2.0 / (1.0 + 256.0 / static_cast<double>(L))).epsilon(1e-12));
      CHECK(prefill_cell(prefill, L, "v2 blocked", "GFLOP done") < flash);
    }
  }
  SECTION("every claim has evidence, and the machine-independent ones held") {
    REQUIRE(results["claims"].size() == 8);
    for (const auto& c : results["claims"]) {
      INFO(c.dump());
      CHECK(c["evidence"].get<std::string>() != "");
      CHECK(c["source"].get<std::string>() != "");
      if (!c["held"].get<bool>()) CHECK(c["cause"].get<std::string>() != "");
    }
    // Bytes, FLOPs, validation and token identity do not depend on the machine.
    for (const char* id :
         {"05.matches_v0", "05.same_tokens", "05.equal_work", "05.fewer_bytes", "05.flash_more_flops_than_blocked"})
      CHECK(claim(results, id)["held"] == true);
    // The crossover length comes from this machine's L2 and is named in the claim.
    const int L_star = blocked_crossover_length(cpu_fast_memory_bytes());
    CHECK_THAT(claim(results, "05.flash_faster_past_crossover")["statement"].get<std::string>(),
               Catch::Contains("L* = " + std::to_string(L_star)));
    CHECK_THAT(results["verdict"].get<std::string>(), Catch::Contains("claims held"));
  }
}

TEST_CASE("the crossover length is the L at which blocked's 64 x L slab fills the L2", "[lab05]") {
  CHECK(blocked_crossover_length(512.0 * 1024) == 2048);
  CHECK(blocked_crossover_length(1024.0 * 1024) == 4096);
  CHECK(blocked_crossover_length(2048.0 * 1024) == 8192);
  // At L* the slab spills: blocked's counted bytes jump by its four passes over the last block's slab.
  const AttentionShape head{1, 1, 64};
  const double M = 1024.0 * 1024;
  const auto bytes = [&](int L, double m) {
    return attention_traffic(AttentionVersion::BLOCKED, {head, L, 0, 0, 1}, m).bytes;
  };
  CHECK(bytes(4096, M) > bytes(4096, 2 * M));
  CHECK(bytes(4095, M) == bytes(4095, 2 * M));
}

TEST_CASE("lab 05 refuses bad flags with one error naming the flag", "[lab05]") {
  test::check_flags_refused(LAB05_EXE, {"--lengths 0", "--contexts -4", "--crossover-lengths 0", "--attention fast"});
}

TEST_CASE(
    "the tiny model with flash attention in deterministic mode gives a prompt's last logits the same bits "
    "in a prefill and token by token",
    "[lab05][deterministic]") {
  // Batch invariance end to end: prefill of 40 tokens at once, and the same 40
  // tokens fed one step at a time through the KV cache, end on the same row.
  ModelOptions options;
  options.deterministic = true;
  options.attention = AttentionKind::FLASH;
  options.num_threads = 2;
  auto model = Model::from_preset("tiny", 3, options);
  std::vector<std::int32_t> prompt(40);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::int32_t>((i * 37 + 11) % 512);
  HostKVCache one_shot(model->config(), 1, 64), stepwise(model->config(), 1, 64);
  Batch all;
  all.add({0}, 0, prompt, LogitsFor::Last);
  const auto prefill = model->forward(all, one_shot);
  std::vector<float> last;
  for (int t = 0; t < 40; ++t) {
    Batch b;
    b.add({0}, t, std::span(prompt).subspan(static_cast<std::size_t>(t), 1), LogitsFor::Last);
    last = model->forward(b, stepwise);
  }
  CHECK(last == prefill);
}
