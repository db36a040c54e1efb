// SPDX-License-Identifier: MIT
// Grading tests of lab 05 (ctest -L lab05), the lab's own run and the
// engine with flash on: the ladder's switch, the tables of a --quick run,
// the model's tokens under flash in deterministic mode. The kernel tests of
// the same label (every version against v0, split-K, paged, deterministic)
// live in tests/engine/kernels/flash_attention_test.cpp, compiled in here.
#include "core/error.h"
#include "lab_runner.h"
#include "model/model.h"
#include "serve/generate.h"
#include "serve/ladder.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("lab 05 = lab 04 + flash attention: configure() differs in exactly its fields", "[lab05]") {
  CHECK(test::ladder_step(5) == test::Fields{"model.attention"});
}

TEST_CASE("lab 05 --quick validates every version and keeps lab 04's tokens", "[lab05]") {
  test::ScratchDir out("lab05");
  const auto [r, dir, results] = test::run_lab_quick(LAB05_EXE, "05_flash_attention", out.path());
  // The run used the ladder: each side is configure() over the base it recorded, and they differ in the switch.
  CHECK(differences(test::ran(results, "serving, lab 04", 4), test::ran(results, "serving, flash", 5)) ==
        test::Fields{"model.attention"});
  // Prefill: five versions at each of the two quick lengths, none left out.
  const auto& prefill = test::table(results, "prefill");
  REQUIRE(prefill["rows"].size() == 10);
  const auto version = test::column(prefill, "version"), bytes = test::column(prefill, "bytes [MiB]");
  for (const auto& row : prefill["rows"])
    if (row[version] == "v3 flash" || row[version] == "v1 standard") CHECK(row[bytes].get<std::string>() != "");
  // Flash counts fewer bytes than standard attention at every L.
  for (std::size_t i = 0; i < 10; i += 5)
    CHECK(std::stod(prefill["rows"][i + 3][bytes].get<std::string>()) <
          std::stod(prefill["rows"][i + 1][bytes].get<std::string>()));
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

TEST_CASE("lab 05 refuses bad flags with one error naming the flag", "[lab05]") {
  const std::string lab = LAB05_EXE;
  test::check_refused(lab + " --quick --lengths 0 --out /tmp", "--lengths");
  test::check_refused(lab + " --quick --contexts -4 --out /tmp", "--contexts");
  test::check_refused(lab + " --quick --attention fast --out /tmp", "--attention");
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
