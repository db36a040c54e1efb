// SPDX-License-Identifier: MIT
// The step trace (trace/chrome_trace.h): a run with chunked prefill and preemption
// writes a trace the schema accepts (event types, monotonic tracks, closed spans,
// block counters equal to the pool's accounting at every step), with the same tokens
// as the run without it; a simulated engine's trace says so; the cap truncates
// cleanly; an unwritable path is one clear error.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "perf/hardware.h"
#include "serve/engine.h"
#include "trace/chrome_trace.h"
#include "trace_schema.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;

namespace {  // (names of their own: a unity build compiles this file beside others with helpers)

using TraceIds = std::vector<std::int32_t>;

/// Llama-3-8B on an H100's datasheet, run by @p max_num_seqs sequences in @p kv_gib GiB of KV.
Engine simulated_8b(int max_num_seqs, std::size_t kv_gib) {
  const SimulatedModel sim{preset("llama-3-8b"), CostModel::for_hardware(gpu("H100 SXM"), 0.002),
                           StepDtypes{DType::BF16, DType::BF16, DType::BF16}};
  EngineConfig config;
  config.scheduler = {.max_num_seqs = max_num_seqs, .max_num_batched_tokens = 4096};
  config.kv_cache_memory = kv_gib << 30;
  config.log = [](const std::string&) {};
  return Engine(sim, config);
}

/// Few blocks and a small budget: prompts are chunked, and decodes run the pool dry (preemption).
EngineConfig trace_tight_config() {
  EngineConfig c;
  c.scheduler = {.max_num_seqs = 6, .max_num_batched_tokens = 24, .enable_chunked_prefill = true};
  c.block_size = 4;
  c.num_gpu_blocks_override = 20;
  c.log = [](const std::string&) {};
  return c;
}

/// Records what the pool said after every step, beside the trace.
struct TracePoolWatch final : StepObserver {
  explicit TracePoolWatch(const Engine& e) : engine(e) {}
  void on_request(const RequestEvent&) override {}
  void on_step(const StepRecord& r) override {
    const BlockPool& pool = engine.kv_cache_manager().block_pool();
    used[r.step] = pool.num_blocks() - pool.num_free_blocks();
  }
  const Engine& engine;
  std::map<long, int> used;  // step -> blocks in use after it
};

/// Serves six requests on @p engine to the end; returns every request's output tokens.
std::vector<TraceIds> serve_six(Engine& engine, int vocab) {
  for (int i = 0; i < 6; ++i) engine.add_request(synthetic_prompt(10 + 7 * i, vocab, 40 + i), {}, 12);
  while (engine.has_unfinished_requests()) engine.step();
  std::vector<TraceIds> out;
  for (const Request* r : engine.requests())
    out.emplace_back(r->output_token_ids().begin(), r->output_token_ids().end());
  return out;
}

nlohmann::json read_trace_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::filesystem::path trace_temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("servelab_trace_test_" + name + ".json");
}

}  // namespace

TEST_CASE("trace: a chunked, preempting run writes a trace the schema accepts, tokens unchanged", "[trace]") {
  // Deterministic reductions: a request's tokens do not depend on the batch it shares.
  ModelOptions options;
  options.deterministic = true;
  auto model = Model::from_preset("tiny", 7, options);
  const int vocab = model->config().vocab_size;
  std::vector<TraceIds> plain;
  {
    Engine engine(*model, trace_tight_config());
    plain = serve_six(engine, vocab);
  }
  const auto path = trace_temp_path("run");
  Engine engine(*model, trace_tight_config());
  TracePoolWatch watch(engine);
  engine.add_observer(&watch);
  ChromeTrace trace(path.string());
  trace.attach(engine, "test");
  const std::vector<TraceIds> traced = serve_six(engine, vocab);
  trace.close();
  CHECK(traced == plain);  // the observer changes nothing the engine decides
  REQUIRE(engine.scheduler().num_preemptions() > 0);

  const test::TraceCheck c = test::check_trace(read_trace_file(path));
  for (const auto& p : c.problems) UNSCOPED_INFO(p);
  CHECK(c.problems.empty());
  CHECK(c.processes == 1);
  CHECK(c.requests == 6);
  CHECK(c.preemptions == engine.scheduler().num_preemptions());
  CHECK(c.max_tokens_discarded > 0);
  CHECK(c.prefill_chunks > 0);
  CHECK_FALSE(c.truncated);
  REQUIRE(c.process_names.size() == 1);
  CHECK(c.process_names[0].find("wall clock") != std::string::npos);
  // The tables in the trace hold what the pool counted, step by step.
  REQUIRE(c.used_blocks.size() == watch.used.size());
  for (const auto& [key, used] : c.used_blocks) CHECK(used == watch.used.at(key.second));
  std::filesystem::remove(path);
}

TEST_CASE("trace: a simulated engine's trace is labelled simulated", "[trace]") {
  Engine engine = simulated_8b(4, 1);
  const int vocab = preset("llama-3-8b").vocab_size;
  const auto path = trace_temp_path("sim");
  {
    ChromeTrace trace(path.string());
    trace.attach(engine, "simulated");
    for (int i = 0; i < 3; ++i) engine.add_request(synthetic_prompt(100, vocab, i), {}, 4);
    while (engine.has_unfinished_requests()) engine.step();
  }  // the destructor closes the file
  const test::TraceCheck c = test::check_trace(read_trace_file(path));
  for (const auto& p : c.problems) UNSCOPED_INFO(p);
  CHECK(c.problems.empty());
  REQUIRE(c.process_names.size() == 1);
  CHECK(c.process_names[0].find("simulated clock") != std::string::npos);
  CHECK(c.requests == 3);
  std::filesystem::remove(path);
}

TEST_CASE("trace: the cap stops the trace with a marker and the file stays valid", "[trace]") {
  Engine engine = simulated_8b(64, 4);
  const int vocab = preset("llama-3-8b").vocab_size;
  const auto path = trace_temp_path("cap");
  ChromeTrace trace(path.string(), 64 << 10);
  trace.attach(engine, "capped");
  for (int i = 0; i < 200; ++i) engine.add_request(synthetic_prompt(64, vocab, i), {}, 64);
  while (engine.has_unfinished_requests()) engine.step();
  trace.close();
  CHECK(trace.truncated());
  CHECK(std::filesystem::file_size(path) <= (64u << 10) + 4096);
  const test::TraceCheck c = test::check_trace(read_trace_file(path));
  for (const auto& p : c.problems) UNSCOPED_INFO(p);
  CHECK(c.problems.empty());
  CHECK(c.truncated);
  std::filesystem::remove(path);
}

TEST_CASE("trace: an unwritable path is one error naming --trace", "[trace]") {
  try {
    ChromeTrace trace("/nonexistent-dir/t.json");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("--trace /nonexistent-dir/t.json: cannot write it") != std::string::npos);
  }
}
