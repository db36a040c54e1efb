// SPDX-License-Identifier: MIT
// Grading tests of lab 06 (ctest -L lab06): its latency vocabulary on
// hand-made traces; its own run, which splits the KV cache article's prompt
// 256 + 256 + 256 + 232, leaves chunked K/V equal to one-shot K/V, serves the
// same tokens at every budget, judges every simulated table by one SLO and
// records its claims; and the flags' bad input. No time is asserted.
#include <map>

#include "core/error.h"
#include "lab_runner.h"
#include "latency.h"
#include "serve/ladder.h"
#include "test_util.h"

using namespace servelab;

namespace {

// A request that arrived at 0 and emitted a token at each of @p times (seconds).
Request traced(int id, std::vector<double> times) {
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  Request r(id, prompt, SamplingParams{}, static_cast<int>(times.size()), {}, 0.0);
  r.times.first_scheduled = 0;
  r.times.token_times = std::move(times);
  return r;
}

// Tokens at @p first, then @p gaps gaps of @p gap seconds, with one gap of @p stall after the @p at-th.
std::vector<double> stream(double first, int gaps, double gap, int at = -1, double stall = 0) {
  std::vector<double> t = {first};
  for (int i = 0; i < gaps; ++i) t.push_back(t.back() + (i == at ? stall : gap));
  return t;
}

}  // namespace

TEST_CASE("lab 06's vocabulary: the ITL p99 sees a stall that TPOT, a per-request mean, dilutes", "[lab06]") {
  // A: 20 gaps of 10 ms and one of 300 ms (a step that carried a prompt); B: 21 gaps of 10 ms.
  const Request a = traced(0, stream(0.1, 21, 0.01, 10, 0.3)), b = traced(1, stream(0.1, 21, 0.01));
  const lab06::RunLatency run = lab06::run_latency({&a, &b}, {.ttft = 0.2, .tbt = 0.05});
  // A's mean gap is (20 * 0.01 + 0.3) / 21 = 23.8 ms: within 50 ms, though one of its gaps is 300 ms.
  CHECK(run.m.tpot.mean == Approx((0.5 / 21 + 0.01) / 2));
  CHECK(run.m.itl.p99 >= run.m.tpot.mean);
  CHECK(run.m.itl.p99 > 0.05);   // 42 gaps, one of 300 ms: the p99 interpolates towards it
  CHECK(run.m.tpot.p99 < 0.05);  // over two means, both under 50 ms
  CHECK_FALSE(run.meets_itl);
  CHECK(run.meets_tpot);
  // Goodput counts requests by the same SLO: both in the TPOT reading, only B (no gap over 50 ms) in the ITL one.
  CHECK(run.goodput_tpot * run.m.duration == Approx(2));
  CHECK(run.goodput_itl * run.m.duration == Approx(1));
  // Without the stall the two readings agree.
  const Request steady = traced(0, stream(0.1, 21, 0.01));
  const lab06::RunLatency calm = lab06::run_latency({&steady, &b}, {.ttft = 0.2, .tbt = 0.05});
  CHECK(calm.meets_itl);
  CHECK(calm.goodput_itl == calm.goodput_tpot);
  // A late first token fails both readings.
  const Request late = traced(0, stream(0.5, 21, 0.01));
  CHECK(lab06::run_latency({&late}, {.ttft = 0.2, .tbt = 0.05}).goodput_itl == 0);
  CHECK(lab06::run_latency({&late}, {.ttft = 0.2, .tbt = 0.05}).goodput_tpot == 0);
}

TEST_CASE("lab 06 = lab 05 + chunked prefill: configure() differs in exactly its fields", "[lab06]") {
  CHECK(test::ladder_step(6) == test::Fields{"engine.scheduler.enable_chunked_prefill"});
}

TEST_CASE("lab 06 --quick splits the long prompt and keeps every token", "[lab06]") {
  test::ScratchDir out("lab06");
  const auto [r, dir, results] = test::run_lab_quick(LAB06_EXE, "06_chunked_prefill", out.path());
  // No chunking needs a budget a whole long prompt fits in; chunked runs at the --budgets value.
  CHECK(test::rung_step(results, {"head-of-line, no chunking", 5}, {"head-of-line, chunked, budget 128", 6}) ==
        test::Fields{"engine.scheduler.max_num_batched_tokens", "engine.scheduler.enable_chunked_prefill"});
  // The KV cache article's 1,000-token prompt, split by the engine's scheduler.
  const auto& split = test::table(results, "article_split");
  std::vector<int> chunks;
  for (const auto& row : split["rows"]) chunks.push_back(row[test::column(split, "prompt chunk")].get<int>());
  CHECK(chunks == std::vector<int>{256, 256, 256, 232});
  CHECK(split["rows"].back()[test::column(split, "first token sampled")] == "yes");

  const auto& hol = test::table(results, "head_of_line");
  REQUIRE(hol["rows"].size() == 2);
  const auto prefill_steps = test::column(hol, "steps with prefill"), hash = test::column(hol, "tokens hash");
  CHECK(hol["rows"][0][prefill_steps] == 2);   // no chunking: each of the two 512-token prompts in one step
  CHECK(hol["rows"][1][prefill_steps] == 10);  // budget 128 beside 4 decodes: 124 + 124 + 124 + 124 + 16, twice
  CHECK(hol["rows"][0][hash] == hol["rows"][1][hash]);
  CHECK(hol["rows"][1][test::column(hol, "long prompts' K/V")] == "identical");  // chunked K/V == one-shot K/V
  const auto& sweep = test::table(results, "budget_sweep");
  REQUIRE(sweep["rows"].size() == 2);
  CHECK(sweep["rows"][0][test::column(sweep, "tokens hash")] == sweep["rows"][1][test::column(sweep, "tokens hash")]);
  CHECK(std::filesystem::exists(dir / "head_of_line_steps.csv"));
  CHECK(test::table(results, "calibration")["rows"].size() == 2);

  // Every simulated table names its GPU, model and the one SLO that its goodput, meets-SLO and capacity use.
  const std::string slo = "SLO TTFT <= 1000 ms, token gap <= 15 ms";
  for (const char* name : {"gpu_simulated", "capacity", "rate_sweep"}) {
    const std::string title = test::table(results, name)["title"];
    INFO(name << ": " << title);
    CHECK(title.find("llama-3-8b") != std::string::npos);
    CHECK(title.find("H100 SXM") != std::string::npos);
    CHECK(title.find(slo) != std::string::npos);
  }
  const auto& gpu = test::table(results, "gpu_simulated");
  REQUIRE(gpu["rows"].size() == 6);  // no chunking and budgets 512 to 8,192, kept in --quick
  for (const auto& row : gpu["rows"]) CHECK(row[0].get<std::string>().find("(simulated)") != std::string::npos);
  // Goodput under the SLO is not the throughput: without chunks most requests see a gap over 15 ms.
  const auto& plain = gpu["rows"][0];
  CHECK(plain[test::column(gpu, "goodput, ITL [req/s]")].get<double>() <
        plain[test::column(gpu, "requests/s")].get<double>());
  CHECK(plain[test::column(gpu, "meets SLO, ITL")] == "no");
  const auto& rates = test::table(results, "rate_sweep");
  REQUIRE(rates["rows"].size() == 12);
  for (const auto& row : rates["rows"]) CHECK(row[0].get<std::string>().find("(simulated)") != std::string::npos);
  CHECK(test::table(results, "not_enough")["rows"].size() == 3);
  const auto& speed = test::table(results, "simulator_speed");
  REQUIRE(speed["rows"].size() == 1);
  CHECK(speed["rows"][0][test::column(speed, "requests")] == 1000);
  CHECK(speed["rows"][0][test::column(speed, "simulated serving [s]")].get<double>() > 0);

  // Every claim is recorded with evidence (and a cause when it missed); those that do not depend on this machine
  // (the scheduler's split, byte equality under deterministic reductions, the simulator) held.
  std::map<std::string, bool> held;
  for (const auto& c : results["claims"]) {
    INFO(c.dump());
    CHECK_FALSE(c["evidence"].get<std::string>().empty());
    if (!c["held"].get<bool>()) CHECK_FALSE(c["cause"].get<std::string>().empty());
    held[c["id"]] = c["held"];
  }
  for (const char* id :
       {"06.split", "06.kv_equal", "06.budget_direction_sim", "06.capacity_sim", "06.not_enough_sim"}) {
    INFO(id);
    REQUIRE(held.contains(id));
    CHECK(held[id]);
  }
  for (const char* id : {"06.stall_here", "06.tpot_dilutes", "06.spike_sim", "06.budget_ttft_here"})
    CHECK(held.contains(id));
}

TEST_CASE("lab 06 refuses bad flags with one error naming the flag", "[lab06]") {
  const std::pair<const char*, const char*> refused[] = {
      {"--budgets 0", "--budgets"},
      {"--long-prompt 100000", "--long-prompt"},
      {"--long-prompts 0", "--long-prompts"},
      {"--slo-tbt-ms 0", "--slo-tbt-ms"},
      {"--gpu B200", "B200"},
      {"--gpu-rate 0", "--gpu-rate"},
      {"--long-prefill-token-threshold -1", "--long-prefill-token-threshold"},
      {"--long-prefill-token-threshold 1.5", "--long-prefill-token-threshold"},
      {"--long-context-prompt 9000", "--long-context-prompt"}};
  for (const auto& [flags, message] : refused)
    test::check_refused(std::string(LAB06_EXE) + " --quick " + flags + " --out /tmp", message);
}

TEST_CASE("servelab serve checks --long-prefill-token-threshold before it serves", "[lab06]") {
  const std::string serve = std::string(SERVELAB_EXE) + " serve --preset tiny --port 0";
  test::check_refused(serve + " --long-prefill-token-threshold -1 --enable-chunked-prefill", ">= 0");
  test::check_refused(serve + " --long-prefill-token-threshold abc --enable-chunked-prefill",
                      "--long-prefill-token-threshold");
  test::check_refused(serve + " --long-prefill-token-threshold 64", "--enable-chunked-prefill");
}
