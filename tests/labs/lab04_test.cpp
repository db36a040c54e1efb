// SPDX-License-Identifier: MIT
// Grading tests of lab 04 (ctest -L lab04), the lab's own run: the
// fragmentation example, the KV placement table, the three serving policies
// giving identical tokens, and refusals. The engine-level tests of the same
// label (block pool, scheduler, paged attention, engine) live beside the
// engine's tests and are compiled into this executable too.
#include "core/error.h"
#include "lab_runner.h"
#include "serve/ladder.h"
#include "test_util.h"

using namespace servelab;

namespace {

/// Lab 04's switch: the fields its configuration changes over lab 03's.
const test::Fields kLab04Fields{"engine.scheduler.policy", "engine.block_size"};

}  // namespace

TEST_CASE("lab 04 = lab 03 + paged KV blocks and continuous batching: configure() differs in exactly its fields",
          "[lab04]") {
  CHECK(test::ladder_step(4) == kLab04Fields);
  REQUIRE_ERROR_MENTIONS(Techniques::for_lab(8), "lab 8");
}

TEST_CASE("lab 04 --quick prints the three tables with the same tokens under every policy", "[lab04]") {
  test::ScratchDir out("lab04");
  const auto [r, dir, results] = test::run_lab_quick(LAB04_EXE, "04_paged_attention", out.path());
  CHECK(test::rung_step(results, {"one at a time", 3}, {"continuous", 4}) == kLab04Fields);
  // The fragmentation example: contiguous refuses D although enough tokens are free; paged fits it.
  const auto& example = test::table(results, "fragmentation_example");
  REQUIRE(example["rows"].size() == 2);
  CHECK(example["rows"][0][test::column(example, "D fits")] == "no");
  CHECK(example["rows"][0][test::column(example, "free after B [tokens]")] == 1100);
  CHECK(example["rows"][1][test::column(example, "D fits")] == "yes");
  // Placement: smaller blocks hold more real KV of what they allocate, and run more requests at once.
  const auto& memory = test::table(results, "kv_memory");
  REQUIRE(memory["rows"].size() == 4);
  const auto real = test::column(memory, "real of held [%]"), most = test::column(memory, "most running");
  for (std::size_t i = 1; i < 4; ++i) {
    CHECK(memory["rows"][i][real].get<double>() >= memory["rows"][i - 1][real].get<double>());
    CHECK(memory["rows"][i][most].get<int>() >= memory["rows"][i - 1][most].get<int>());
  }
  CHECK(memory["rows"][0][test::column(memory, "last-block slack [%]")] == 0.0);  // contiguous: a reservation, no slack
  // Serving: three policies, one tokens hash, batches larger than one when batching.
  const auto& serving = test::table(results, "serving");
  REQUIRE(serving["rows"].size() == 3);
  const auto hash = test::column(serving, "tokens hash"), batch = test::column(serving, "mean batch");
  CHECK(serving["rows"][0][hash] == serving["rows"][1][hash]);
  CHECK(serving["rows"][0][hash] == serving["rows"][2][hash]);
  CHECK(serving["rows"][0][batch] == 1.0);
  CHECK(serving["rows"][2][batch].get<double>() > 1.0);
  CHECK(test::table(results, "timeline")["rows"].size() == serving["rows"][2][test::column(serving, "steps")]);
  // Slots: --quick serves 20 requests in 16 slots, so one at a time uses one of them and static batching
  // leaves some idle that continuous batching fills, in fewer steps.
  const auto slots = test::column(serving, "slots used [%]"), steps = test::column(serving, "steps");
  CHECK(serving["rows"][0][slots] == Approx(100.0 / 16));
  CHECK(serving["rows"][1][slots].get<double>() < serving["rows"][2][slots].get<double>());
  CHECK(serving["rows"][2][steps].get<int>() < serving["rows"][1][steps].get<int>());
  // Prefix caching: the same tokens with and without it; what hits is not computed; every request after the
  // first (10 in --quick, sharing 128 tokens) finds the whole system prompt cached.
  const auto& prefix = test::table(results, "prefix_cache");
  REQUIRE(prefix["rows"].size() == 2);
  const auto p_hash = test::column(prefix, "tokens hash"), hits = test::column(prefix, "hit tokens"),
             computed = test::column(prefix, "prompt tokens computed"), prompt = test::column(prefix, "prompt tokens");
  CHECK(prefix["rows"][0][p_hash] == prefix["rows"][1][p_hash]);
  CHECK(prefix["rows"][0][hits] == 0);
  CHECK(prefix["rows"][0][computed] == prefix["rows"][0][prompt]);
  CHECK(prefix["rows"][1][hits].get<int>() == 9 * 128);
  CHECK(prefix["rows"][1][computed].get<int>() == prefix["rows"][1][prompt].get<int>() - 9 * 128);
  test::check_claims(results,
                     {"04.prefix_cache", "04.fragmentation", "04.real_of_held", "04.more_requests", "04.same_tokens",
                      "04.fewer_steps", "04.static_idle_slots", "04.batching_throughput"},
                     {"04.fragmentation", "04.real_of_held", "04.more_requests", "04.same_tokens", "04.fewer_steps",
                      "04.static_idle_slots"});
  for (const char* csv : {"fragmentation_example.csv", "kv_memory.csv", "serving.csv", "timeline.csv",
                          "kv_memory_timeline.csv", "prefix_cache.csv"})
    CHECK(std::filesystem::exists(dir / csv));
}

TEST_CASE("lab 04 preempts when KV runs short and still gives the same tokens", "[lab04]") {
  test::ScratchDir out("lab04-tight");
  // 204,800 bytes = 100 tokens of the small preset (2 KiB each): 20 requests of up to 56 tokens must take turns.
  const auto [r, dir, results] =
      test::run_lab_quick(LAB04_EXE, "04_paged_attention", out.path(), "--kv-cache-memory 204800 --block-size 4");
  const auto& serving = test::table(results, "serving");
  CHECK(serving["rows"][2][test::column(serving, "preemptions")].get<int>() > 0);
  const auto hash = test::column(serving, "tokens hash");
  CHECK(serving["rows"][0][hash] == serving["rows"][2][hash]);
  CHECK(r.err.find("preempted request") != std::string::npos);
}

TEST_CASE("lab 04 refuses bad flags with one error naming the flag", "[lab04]") {
  test::check_flags_refused(LAB04_EXE,
                            {"--block-size 0", "--max-num-seqs 0", "--num-requests 0", "--prompt-len-dist uniform:9",
                             "--arrival poisson:-1", "--max-num-batched-tokens 8", "--kv-cache-memory 100"});
}
