/**
 * @file model_step_bench.cpp
 * @brief Google Benchmark of one model step: prefill of a prompt and one
 *        decode step, fast vs deterministic reductions, on a synthetic preset.
 *
 * Run: build/bench/bench_model_step [--benchmark_filter=...]
 * Environment SERVELAB_BENCH_PRESET picks the preset (default "small").
 */
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <numeric>

#include "model/model.h"

namespace {

using namespace servelab;

Model& model_for(bool deterministic) {
  static const char* env = std::getenv("SERVELAB_BENCH_PRESET");
  static std::unique_ptr<Model> model = Model::from_preset(env ? env : "small", 0, EngineOptions{});
  model->set_deterministic(deterministic);
  return *model;
}

void BM_Prefill(benchmark::State& state) {
  Model& model = model_for(state.range(1) != 0);
  const int L = static_cast<int>(state.range(0));
  std::vector<std::int32_t> prompt(L);
  std::iota(prompt.begin(), prompt.end(), 0);
  ContiguousKVCache cache(model.config(), 1, L);
  for (auto _ : state) {
    Batch batch;
    batch.add(0, 0, prompt);
    benchmark::DoNotOptimize(model.forward(batch, cache));
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(L), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Decode(benchmark::State& state) {
  Model& model = model_for(state.range(1) != 0);
  const int context = static_cast<int>(state.range(0));
  ContiguousKVCache cache(model.config(), 1, context + 1);
  const std::int32_t token = 1;
  for (auto _ : state) {
    Batch batch;
    batch.add(0, context, std::span(&token, 1));
    benchmark::DoNotOptimize(model.forward(batch, cache));
  }
  state.counters["tokens/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_Prefill)->ArgsProduct({{128, 512}, {0, 1}})->ArgNames({"L", "deterministic"})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Decode)->ArgsProduct({{128}, {0, 1}})->ArgNames({"context", "deterministic"})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
