// SPDX-License-Identifier: MIT
// Hidden lab 07 tests: a transfer plan carried out byte by byte on random
// block tables, and a remote request whose first token is a stop token.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "disagg/kv_transfer_plan.h"
#include "graded.h"
#include "serve/engine.h"
#include "test_util.h"

using namespace servelab;
using disagg::KVLayout;

TEST_CASE("hidden: carrying out a plan on random tables copies exactly the request's rows", "[lab07][hidden]") {
  const KVLayout src{.num_layers = 2, .num_blocks = 12, .block_size = 3, .kv_dim = 1, .dtype_bytes = 4};
  KVLayout dst = src;
  dst.num_blocks = 20;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    const int tokens = 1 + static_cast<int>(rng() % 30), blocks = (tokens + 2) / 3;
    std::vector<std::int32_t> s(12), d(20);
    std::iota(s.begin(), s.end(), 0);
    std::iota(d.begin(), d.end(), 0);
    if (trial % 3 != 0) {  // every third trial keeps both tables in order: one run
      std::shuffle(s.begin(), s.end(), rng);
      std::shuffle(d.begin(), d.end(), rng);
    }
    s.resize(static_cast<std::size_t>(blocks));
    d.resize(static_cast<std::size_t>(blocks));
    const auto plan = disagg::plan_transfer(src, s, dst, d, tokens, 0, 2);
    // Source bytes: region r, layer l, block b, row t holds the value 1000 r + 100 l + 10 b + t.
    std::vector<std::vector<float>> from(2, std::vector<float>(2 * 12 * 3)), to(2, std::vector<float>(2 * 20 * 3, -1));
    for (int r = 0; r < 2; ++r)
      for (std::size_t i = 0; i < from[r].size(); ++i) from[r][i] = static_cast<float>(1000 * r + i);
    for (const auto& desc : plan.descriptors)
      std::memcpy(reinterpret_cast<char*>(to[desc.remote_region].data()) + desc.remote_offset,
                  reinterpret_cast<const char*>(from[desc.local_region].data()) + desc.local_offset, desc.length);
    std::vector<std::vector<float>> expected(2, std::vector<float>(2 * 20 * 3, -1));
    for (int r = 0; r < 2; ++r)
      for (int l = 0; l < 2; ++l)
        for (int t = 0; t < tokens; ++t)
          expected[r][static_cast<std::size_t>((l * 20 + d[t / 3]) * 3 + t % 3)] =
              from[r][static_cast<std::size_t>((l * 12 + s[t / 3]) * 3 + t % 3)];
    INFO("trial " << trial << " tokens " << tokens);
    CHECK(to == expected);
    CHECK(plan.bytes == static_cast<std::uint64_t>(2 * 2 * tokens * 4));
    CHECK(plan.num_uncoalesced == 2 * 2 * blocks);
    if (trial % 3 == 0) CHECK(plan.descriptors.size() == 4);
  }
}

TEST_CASE("hidden: a remote request whose first token is a stop token finishes when its KV arrives",
          "[lab07][hidden]") {
  auto model = test::deterministic_tiny();
  EngineConfig config;
  config.num_gpu_blocks_override = 4;
  config.log = [](const std::string&) {};
  Engine engine(*model, config);
  const std::vector<std::int32_t> prompt(20, 2);
  const std::optional<int> stopped = engine.add_remote_request(prompt, SamplingParams{}, 5, {9});
  const std::optional<int> going = engine.add_remote_request(prompt, SamplingParams{}, 2, {9});
  REQUIRE(stopped.has_value());
  REQUIRE(going.has_value());
  engine.kv_arrived(*stopped, 9, 0.0);
  CHECK(engine.request(*stopped).is_finished());
  CHECK(engine.request(*stopped).finish_reason == FinishReason::STOP);
  engine.kv_arrived(*going, 4, 0.0);
  CHECK(engine.request(*going).num_computed_tokens == 20);
  engine.step();  // the first token's KV and the second token
  CHECK(engine.last_step().num_scheduled_tokens == 1);
  CHECK(engine.request(*going).is_finished());
  CHECK_FALSE(engine.has_unfinished_requests());
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() == 4);
}
