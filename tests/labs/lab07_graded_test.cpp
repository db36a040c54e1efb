// SPDX-License-Identifier: MIT
// Graded tests of what a lab 07 student writes (the LAB07 regions): the KV
// transfer plan's descriptors by hand (runs merged only where both sides'
// blocks are consecutive, the last block's rows, the layer range, K before
// V), and what the decode side does when a request's KV arrives. Each one
// fails on the wrong implementations in tests/labs/mutants/lab07/.
#include <string>
#include <vector>

#include "config/model_config.h"
#include "disagg/kv_transfer_plan.h"
#include "graded.h"
#include "perf/cost_model.h"
#include "perf/hardware.h"
#include "serve/engine.h"
#include "test_util.h"

using namespace servelab;
using disagg::KVLayout;
using disagg::plan_transfer;
using disagg::TransferDescriptor;

namespace {

/// 3 layers of 16 blocks of 4 tokens, 2 floats a row: 8 bytes a row, 32 a block, 512 a layer.
constexpr KVLayout kGradedLayout{.num_layers = 3, .num_blocks = 16, .block_size = 4, .kv_dim = 2, .dtype_bytes = 4};

std::uint64_t plan_at(int layer, int block) { return (static_cast<std::uint64_t>(layer) * 16 + block) * 32; }

/// "region:local+length->remote" per descriptor, e.g. "0:160+96->0".
std::string graded_describe(const std::vector<TransferDescriptor>& ds) {
  std::string s;
  for (const TransferDescriptor& d : ds) {
    if (!s.empty()) s += ' ';
    CHECK(d.local_region == d.remote_region);
    s += std::to_string(d.local_region) + ":" + std::to_string(d.local_offset) + "+" + std::to_string(d.length) + "->" +
         std::to_string(d.remote_offset);
  }
  return s;
}

std::string plan_run(int region, std::uint64_t local, std::uint64_t length, std::uint64_t remote) {
  return std::to_string(region) + ":" + std::to_string(local) + "+" + std::to_string(length) + "->" +
         std::to_string(remote);
}

EngineConfig graded_engine_config() {
  EngineConfig config;
  config.scheduler = {SchedulingPolicy::CONTINUOUS, 8, 256, true, 0};
  config.kv_cache_memory = std::size_t{1} << 30;
  config.log = [](const std::string&) {};
  return config;
}

}  // namespace

TEST_CASE("the transfer plan by hand: runs merge only where both sides' blocks are consecutive", "[lab07][graded]") {
  SECTION("the KV cache article's blocks [4, 5, 6, 9] -> [0, 1, 2, 3], 14 tokens, layer 1 only") {
    const std::vector<std::int32_t> src{4, 5, 6, 9}, dst{0, 1, 2, 3};
    const auto plan = plan_transfer(kGradedLayout, src, kGradedLayout, dst, 14, 1, 2);
    // Blocks 0-2 in one run of 12 rows, block 3 (src 9) alone with the 2 rows the 14 tokens fill; K then V.
    CHECK(graded_describe(plan.descriptors) ==
          plan_run(0, plan_at(1, 4), 96, plan_at(1, 0)) + " " + plan_run(0, plan_at(1, 9), 16, plan_at(1, 3)) + " " +
              plan_run(1, plan_at(1, 4), 96, plan_at(1, 0)) + " " + plan_run(1, plan_at(1, 9), 16, plan_at(1, 3)));
    CHECK(plan.num_uncoalesced == 8);  // 2 regions x 1 layer x 4 blocks
    CHECK(plan.bytes == 2 * 14 * 8);
  }
  SECTION("consecutive on one side only: nothing merges across the break") {
    const std::vector<std::int32_t> src{0, 1, 2}, dst{5, 7, 8};
    const auto plan = plan_transfer(kGradedLayout, src, kGradedLayout, dst, 12, 0, 1);
    CHECK(graded_describe(plan.descriptors) ==
          plan_run(0, plan_at(0, 0), 32, plan_at(0, 5)) + " " + plan_run(0, plan_at(0, 1), 64, plan_at(0, 7)) + " " +
              plan_run(1, plan_at(0, 0), 32, plan_at(0, 5)) + " " + plan_run(1, plan_at(0, 1), 64, plan_at(0, 7)));
    const auto swapped = plan_transfer(kGradedLayout, dst, kGradedLayout, src, 12, 0, 1);
    CHECK(graded_describe(swapped.descriptors) ==
          plan_run(0, plan_at(0, 5), 32, plan_at(0, 0)) + " " + plan_run(0, plan_at(0, 7), 64, plan_at(0, 1)) + " " +
              plan_run(1, plan_at(0, 5), 32, plan_at(0, 0)) + " " + plan_run(1, plan_at(0, 7), 64, plan_at(0, 1)));
  }
  SECTION("every layer, a table longer than the tokens need, one token in the last block") {
    const std::vector<std::int32_t> src{2, 3, 11, 12, 13}, dst{6, 7, 8, 9, 10};
    const auto plan = plan_transfer(kGradedLayout, src, kGradedLayout, dst, 9, 0, 3);
    REQUIRE(plan.descriptors.size() == 12);  // 3 layers x K, V x runs [2, 3] and [11]
    for (int layer = 0; layer < 3; ++layer)
      for (int region = 0; region < 2; ++region) {
        const std::size_t i = static_cast<std::size_t>(layer * 4 + region * 2);
        CHECK(graded_describe({plan.descriptors[i], plan.descriptors[i + 1]}) ==
              plan_run(region, plan_at(layer, 2), 64, plan_at(layer, 6)) + " " +
                  plan_run(region, plan_at(layer, 11), 8, plan_at(layer, 8)));
      }
    CHECK(plan.num_uncoalesced == 2 * 3 * 3);
    CHECK(plan.bytes == 2 * 3 * 9 * 8);
    CHECK(plan_transfer(kGradedLayout, src, kGradedLayout, dst, 9, 2, 2).descriptors.empty());
  }
  SECTION("a peer with a larger cache: its offsets follow its own blocks per layer") {
    KVLayout large = kGradedLayout;
    large.num_blocks = 40;
    const std::vector<std::int32_t> src{1}, dst{30};
    const auto plan = plan_transfer(kGradedLayout, src, large, dst, 3, 2, 3);
    CHECK(graded_describe(plan.descriptors) == plan_run(0, plan_at(2, 1), 24, (2 * 40 + 30) * 32) + " " +
                                                   plan_run(1, plan_at(2, 1), 24, (2 * 40 + 30) * 32));
  }
}

TEST_CASE(
    "when the KV arrives the prompt counts as computed and the first token joins, and the next step feeds one token",
    "[lab07][graded]") {
  const SimulatedModel sim{preset("llama-3-8b"), CostModel::for_hardware(gpu("H100 SXM"), 0.002),
                           StepDtypes{DType::BF16, DType::BF16, DType::BF16}};
  Engine engine(sim, graded_engine_config());
  const std::vector<std::int32_t> prompt(100, 7);
  const SamplingParams sampled{.temperature = 1.0f, .seed = 42};
  const int id = engine.add_prefilled_request(prompt, sampled, 3, 321, 0.0, 0.25);
  const Request& r = engine.request(id);
  CHECK(r.status == RequestStatus::WAITING);
  CHECK(r.num_computed_tokens == 100);
  REQUIRE(r.num_output_tokens() == 1);
  CHECK(r.output_token_ids()[0] == 321);
  REQUIRE(r.times.token_times.size() == 1);
  CHECK(r.times.token_times[0] == 0.25);
  // The sampler has moved past the draw the prefill side made.
  std::vector<float> logits(64, 0.0f);
  Sampler expected(sampled), copy = r.sampler;
  expected.skip(1);
  for (int i = 0; i < 8; ++i) CHECK(copy.sample(logits) == expected.sample(logits));
  engine.step();
  CHECK(engine.last_step().num_scheduled_tokens == 1);  // the first token's KV, nothing of the prompt again
  CHECK(engine.last_step().num_decode_tokens == 1);
  CHECK(r.num_output_tokens() == 2);
}

TEST_CASE("a request whose first token from the prefill side was its last finishes and frees its blocks",
          "[lab07][graded]") {
  auto model = test::deterministic_tiny();
  EngineConfig config = graded_engine_config();
  config.num_gpu_blocks_override = 8;
  Engine engine(*model, config);
  const std::vector<std::int32_t> prompt(10, 3);
  const std::optional<int> id = engine.add_remote_request(prompt, SamplingParams{}, 1);
  REQUIRE(id.has_value());
  const int free_before = engine.kv_cache_manager().block_pool().num_free_blocks();
  engine.kv_arrived(*id, 5, 0.5);
  const Request& r = engine.request(*id);
  CHECK(r.is_finished());
  CHECK(r.output_token_ids()[0] == 5);
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() > free_before);
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() == 8);
  CHECK_FALSE(engine.has_unfinished_requests());
}
