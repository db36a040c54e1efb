// SPDX-License-Identifier: MIT
// Remote KV in the one engine (disaggregated serving without processes): a
// prefill engine holds a finished prompt's blocks, the KV is copied into the
// blocks a decode engine took for a request waiting for it, and the decode
// engine then schedules, preempts and samples it as any request, giving the
// tokens a single engine gives.
#include <vector>

#include "core/error.h"
#include "serve/engine.h"
#include "test_util.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;

namespace {

struct RemoteKvFixture {
  RemoteKvFixture() {
    ModelOptions options;
    options.deterministic = true;  // batch-invariant: alone, batched and recomputed agree exactly
    model = Model::from_preset("tiny", 5, options);
  }
  EngineConfig config(int num_blocks, bool hold = false) const {
    EngineConfig c;
    c.block_size = 4;
    c.num_gpu_blocks_override = num_blocks;
    c.scheduler.hold_finished_kv = hold;
    c.log = [](const std::string&) {};
    return c;
  }
  // Output tokens of each prompt on one ordinary engine.
  std::vector<std::vector<std::int32_t>> local(const std::vector<std::vector<std::int32_t>>& prompts, int max_tokens,
                                               const SamplingParams& sampling = {}) {
    Engine engine(*model, config(256));
    for (const auto& p : prompts) engine.add_request(p, sampling, max_tokens);
    while (engine.has_unfinished_requests()) engine.step();
    std::vector<std::vector<std::int32_t>> out;
    for (const Request* r : engine.requests())
      out.emplace_back(r->output_token_ids().begin(), r->output_token_ids().end());
    return out;
  }
  // Prefills @p prompt on @p prefill (hold_finished_kv) and moves its KV into remote request @p id of
  // @p decode, as a worker pair does over UCX; returns the first token.
  std::int32_t prefill_into(Engine& prefill, Engine& decode, int id, const std::vector<std::int32_t>& prompt,
                            const SamplingParams& sampling = {}) {
    const int p = prefill.add_request(prompt, sampling, 1);
    std::vector<RequestOutput> out;
    while (out.empty()) out = prefill.step();
    REQUIRE(out.size() == 1);
    const auto& src = prefill.kv_cache_manager().block_table(p).block_ids();
    REQUIRE_FALSE(src.empty());  // held after finishing
    std::vector<std::byte> bytes(src.size() * prefill.kv_cache().bytes_per_block());
    prefill.kv_cache().export_blocks(src, bytes);
    decode.kv_cache().import_blocks(decode.kv_cache_manager().block_table(id).block_ids(), bytes);
    prefill.release_request(p);
    return out[0].token;
  }
  std::unique_ptr<Model> model;
};

// @p count prompts of @p length, length + 1, ... tokens (tiny's vocabulary).
std::vector<std::vector<std::int32_t>> prompts(int count, int length) {
  std::vector<std::vector<std::int32_t>> out;
  for (int i = 0; i < count; ++i) out.push_back(synthetic_prompt(length + i, preset("tiny").vocab_size, 100 + i));
  return out;
}

}  // namespace

TEST_CASE_METHOD(RemoteKvFixture, "a remote request waits for its KV, then decodes to a single engine's tokens",
                 "[engine][remote]") {
  const auto ps = prompts(1, 9);
  const auto expected = local(ps, 6);
  Engine prefill(*model, config(64, true)), decode(*model, config(64));
  const std::optional<int> id = decode.add_remote_request(ps[0], {}, 6);
  REQUIRE(id.has_value());
  // The prompt's blocks are taken at once (their ids go to the prefill side): 9 tokens, 3 blocks of 4.
  CHECK(decode.kv_cache_manager().block_table(*id).num_blocks() == 3);
  CHECK(decode.request(*id).status == RequestStatus::WAITING_FOR_REMOTE_KV);
  // Until the KV is in, a step runs nothing for it, and a request behind it is not held up.
  CHECK(decode.step().empty());
  const int behind = decode.add_request(ps[0], {}, 2);
  const std::vector<RequestOutput> first = decode.step();
  REQUIRE(first.size() == 1);
  CHECK(first[0].request_id == behind);
  CHECK(decode.request(*id).status == RequestStatus::WAITING_FOR_REMOTE_KV);

  const std::int32_t token = prefill_into(prefill, decode, *id, ps[0]);
  CHECK(prefill.kv_cache_manager().block_pool().num_free_blocks() == 64);  // released after the move
  decode.kv_arrived(*id, token, decode.now());
  const Request& r = decode.request(*id);
  CHECK(r.num_computed_tokens == 9);
  CHECK(r.num_output_tokens() == 1);
  // Its next step feeds the first token only: a decode, not a prefill.
  while (decode.has_unfinished_requests()) decode.step();
  CHECK(std::vector<std::int32_t>(r.output_token_ids().begin(), r.output_token_ids().end()) == expected[0]);
  CHECK(decode.kv_cache_manager().block_pool().num_free_blocks() == 64);
}

TEST_CASE_METHOD(RemoteKvFixture, "the first step after the KV arrives is a one-token decode", "[engine][remote]") {
  const auto ps = prompts(1, 7);
  Engine prefill(*model, config(64, true)), decode(*model, config(64));
  const int id = decode.add_remote_request(ps[0], {}, 3).value();
  decode.kv_arrived(id, prefill_into(prefill, decode, id, ps[0]), decode.now());
  decode.step();
  CHECK(decode.last_step().num_scheduled_tokens == 1);
  CHECK(decode.last_step().num_decode_tokens == 1);
  CHECK(decode.last_step().num_prefill_tokens == 0);
}

TEST_CASE_METHOD(RemoteKvFixture,
                 "remote requests that outgrow the decode pool are preempted, recomputed, and keep their tokens",
                 "[engine][remote]") {
  // 3 requests of 5-7 prompt tokens and 20 outputs: up to 7 blocks each, 21 together, in a pool of 12.
  const auto ps = prompts(3, 5);
  const auto expected = local(ps, 20);
  Engine prefill(*model, config(64, true)), decode(*model, config(12));
  std::vector<int> ids;
  for (const auto& p : ps) ids.push_back(decode.add_remote_request(p, {}, 20).value());
  for (std::size_t i = 0; i < ps.size(); ++i)
    decode.kv_arrived(ids[i], prefill_into(prefill, decode, ids[i], ps[i]), decode.now());
  while (decode.has_unfinished_requests()) decode.step();
  CHECK(decode.scheduler().num_preemptions() > 0);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const Request& r = decode.request(ids[i]);
    INFO("request " << i << ", preempted " << r.num_preemptions << " times");
    CHECK(std::vector<std::int32_t>(r.output_token_ids().begin(), r.output_token_ids().end()) == expected[i]);
  }
  CHECK(decode.kv_cache_manager().block_pool().num_free_blocks() == 12);
}

TEST_CASE_METHOD(RemoteKvFixture, "a sampled remote request continues the prefill side's random stream",
                 "[engine][remote]") {
  const auto ps = prompts(1, 6);
  const SamplingParams sampling{.temperature = 1.5f, .top_k = 0, .top_p = 1.0f, .seed = 77};
  const auto expected = local(ps, 12, sampling);
  Engine prefill(*model, config(64, true)), decode(*model, config(64));
  const int id = decode.add_remote_request(ps[0], sampling, 12).value();
  decode.kv_arrived(id, prefill_into(prefill, decode, id, ps[0], sampling), decode.now());
  while (decode.has_unfinished_requests()) decode.step();
  const Request& r = decode.request(id);
  CHECK(std::vector<std::int32_t>(r.output_token_ids().begin(), r.output_token_ids().end()) == expected[0]);
}

TEST_CASE_METHOD(RemoteKvFixture,
                 "a remote request computed locally after all gives the same tokens, in the blocks it holds",
                 "[engine][remote]") {
  const auto ps = prompts(1, 10);
  const auto expected = local(ps, 5);
  Engine engine(*model, config(16));
  const int id = engine.add_remote_request(ps[0], {}, 5).value();
  const std::vector<std::int32_t> blocks = engine.kv_cache_manager().block_table(id).block_ids();
  engine.compute_prompt_locally(id);
  engine.step();
  CHECK(engine.kv_cache_manager().block_table(id).block_ids() == blocks);  // no block added for the prompt
  while (engine.has_unfinished_requests()) engine.step();
  const Request& r = engine.request(id);
  CHECK(std::vector<std::int32_t>(r.output_token_ids().begin(), r.output_token_ids().end()) == expected[0]);
}

TEST_CASE_METHOD(RemoteKvFixture, "hold_finished_kv keeps a finished request's blocks until it is released",
                 "[engine][remote]") {
  Engine engine(*model, config(16, true));
  const int id = engine.add_request(prompts(1, 8)[0], {}, 1);
  engine.step();
  REQUIRE(engine.request(id).is_finished());
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() == 14);
  CHECK_FALSE(engine.abort_request(id));  // finished: an abort does not free what is held
  engine.release_request(id);
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() == 16);
}

TEST_CASE_METHOD(RemoteKvFixture, "remote requests: a full pool, aborts, a last first token and misuse",
                 "[engine][remote]") {
  Engine engine(*model, config(4));
  const auto ps = prompts(2, 9);  // 9 and 10 tokens: 3 blocks each
  const int a = engine.add_remote_request(ps[0], {}, 4).value();
  // 1 block left: nothing queued, nothing taken, the caller may ask again later.
  const std::size_t waiting = engine.scheduler().waiting().size();
  CHECK_FALSE(engine.add_remote_request(ps[1], {}, 4).has_value());
  CHECK(engine.scheduler().waiting().size() == waiting);
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() == 1);
  // Never fits (26 + 4 tokens need 8 blocks of the 4): refused, naming the flag that sizes the pool.
  REQUIRE_ERROR_MENTIONS(engine.add_remote_request(synthetic_prompt(26, model->config().vocab_size, 1), {}, 4),
                         "--num-blocks");
  // An aborted remote request gives its blocks back.
  CHECK(engine.abort_request(a));
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() == 4);
  REQUIRE_ERROR_MENTIONS(engine.kv_arrived(a, 1, 0), "not waiting for remote KV");
  // A request whose first token (from the prefill side) was its last finishes at once and frees its blocks.
  const int b = engine.add_remote_request(ps[1], {}, 1).value();
  REQUIRE_ERROR_MENTIONS(engine.kv_arrived(b, model->config().vocab_size, 0), "outside the vocabulary");
  engine.kv_arrived(b, 3, 0);
  CHECK(engine.request(b).is_finished());
  CHECK(engine.request(b).finish_reason == FinishReason::LENGTH);
  CHECK_FALSE(engine.has_unfinished_requests());
  CHECK(engine.kv_cache_manager().block_pool().num_free_blocks() == 4);
  const int c = engine.add_request(ps[0], {}, 2);
  REQUIRE_ERROR_MENTIONS(engine.compute_prompt_locally(c), "not waiting for remote KV");
  REQUIRE_ERROR_MENTIONS(engine.kv_arrived(999, 1, 0), "unknown request id 999");
  // A simulated engine has no KV to receive.
  const SimulatedModel sim{model->config(), CostModel::for_hardware(gpu("A100 80GB SXM"), 0.0), StepDtypes{}};
  Engine simulated(sim, config(64));
  REQUIRE_ERROR_MENTIONS(simulated.add_remote_request(ps[0], {}, 4), "simulated engine has no KV");
}
