/**
 * @file cpu_speed_bench.cpp
 * @brief CPU speed of the engine against limits measured in the same run.
 *
 * For the qwen2.5-0.5b shape (synthetic weights), at 1 and 2 threads, f32 and
 * bf16 weights:
 * - decode tokens/s at batch 1, context 128, beside the streaming-read
 *   bandwidth: fraction = weight bytes per token × tokens/s ÷ bandwidth;
 * - prefill tokens/s for a 512-token prompt, beside OpenBLAS sgemm (its own
 *   threads) on the model's MLP up-projection shape: fraction = model FLOPs per token × tokens/s ÷ sgemm FLOP/s.
 * The limits are measured between the timed iterations of each figure (the
 * median of those runs is reported), because this machine's bandwidth swings
 * over minutes. The table is printed last.
 *
 * Run: build/bench/bench_cpu_speed [--benchmark_repetitions=3]
 */
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "perf/machine.h"
#include "perf/work.h"
#include "core/stats.h"

namespace {

using namespace servelab;

constexpr const char* kPreset = "qwen2.5-0.5b";
constexpr int kPrompt = 512, kContext = 128;

// Weights are made once per dtype; models of different thread counts share them (tensors are shared views).
const ModelWeights& weights(DType dtype) {
  static std::map<DType, ModelWeights> cache;
  auto it = cache.find(dtype);
  if (it == cache.end()) {
    ThreadPool pool(0);
    it = cache.emplace(dtype, synthetic_weights(preset(kPreset), 0, pool, dtype)).first;
  }
  return it->second;
}

std::unique_ptr<Model> model(DType dtype, int threads, bool deterministic) {
  EngineOptions options;
  options.num_threads = threads;
  options.weight_dtype = dtype;
  options.deterministic = deterministic;
  return std::make_unique<Model>(preset(kPreset), weights(dtype), options);
}

// The limits are measured between the timed iterations, so figure and limit see the same machine state.
void BM_Decode(benchmark::State& state) {
  const DType dtype = state.range(0) ? DType::BF16 : DType::F32;
  const int threads = static_cast<int>(state.range(1));
  auto m = model(dtype, threads, state.range(2) != 0);
  ThreadPool pool(threads);
  HostKVCache cache(m->config(), 1, kContext + 1);
  const std::int32_t token = 1;
  std::vector<double> limits;
  for (auto _ : state) {
    state.PauseTiming();
    limits.push_back(measure_read_gbs(pool));
    state.ResumeTiming();
    Batch batch;
    batch.add({0}, kContext, std::span(&token, 1));
    benchmark::DoNotOptimize(m->forward(batch, cache));
  }
  state.counters["tok/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["stream GB/s"] = summarize(limits).median;
}

void BM_Prefill(benchmark::State& state) {
  const DType dtype = state.range(0) ? DType::BF16 : DType::F32;
  const int threads = static_cast<int>(state.range(1));
  auto m = model(dtype, threads, state.range(2) != 0);
  std::vector<std::int32_t> prompt(kPrompt);
  std::iota(prompt.begin(), prompt.end(), 0);
  HostKVCache cache(m->config(), 1, kPrompt);
  std::vector<double> limits;
  for (auto _ : state) {
    state.PauseTiming();
    limits.push_back(measure_sgemm_gflops(threads, kPrompt, preset(kPreset).intermediate_size, preset(kPreset).hidden_size));
    state.ResumeTiming();
    Batch batch;
    batch.add({0}, 0, prompt);
    benchmark::DoNotOptimize(m->forward(batch, cache));
  }
  state.counters["tok/s"] = benchmark::Counter(kPrompt, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["sgemm GFLOP/s"] = summarize(limits).median;
}

// Keeps each run's counters so the summary table can set figures beside their limits.
class Collector : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> value;  // "name" -> counter, the last (or mean) run wins
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      for (const auto& [name, counter] : r.counters) value[r.run_name.function_name + "/" + r.run_name.args + ":" + name] = counter;
    }
  }
};

void print_table(const Collector& c) {
  const ModelConfig config = preset(kPreset);
  auto get = [&](const std::string& key) {
    auto it = c.value.find(key);
    return it == c.value.end() ? 0.0 : it->second;
  };
  // FLOPs per prompt token: 2 per weight of every layer matrix, plus attention over the prompt (average).
  const double layer_matrix_flops = 2.0 * (decode_weight_bytes(config, DType::F32) / 4.0 -
                                           static_cast<double>(config.vocab_size) * config.hidden_size);
  const double attn_per_token = attention_flops(config, 0, kPrompt) / kPrompt;
  std::printf("\n## CPU speed, %s shape (synthetic weights)\n\n", kPreset);
  std::printf("| weights | threads | decode tok/s | GB/s | stream GB/s | of limit | prefill tok/s | GFLOP/s | sgemm GFLOP/s | of limit |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  auto row = [&](int bf16, int threads, int deterministic) {
    const std::string args = "/dtype:" + std::to_string(bf16) + "/threads:" + std::to_string(threads) +
                             "/deterministic:" + std::to_string(deterministic) + ":";
    const double decode = get("BM_Decode" + args + "tok/s"), prefill = get("BM_Prefill" + args + "tok/s");
    const double stream = get("BM_Decode" + args + "stream GB/s"), sgemm = get("BM_Prefill" + args + "sgemm GFLOP/s");
    const double gbs = decode * decode_weight_bytes(config, bf16 ? DType::BF16 : DType::F32) / 1e9;
    const double gflops = prefill * (layer_matrix_flops + attn_per_token) / 1e9;
    std::printf("| %s%s | %d | %.1f | %.1f | %.1f | %.0f%% | %.0f | %.0f | %.0f | %.0f%% |\n", bf16 ? "bf16" : "f32",
                deterministic ? " deterministic" : "", threads, decode, gbs, stream, 100.0 * gbs / stream, prefill,
                gflops, sgemm, 100.0 * gflops / sgemm);
  };
  for (int bf16 : {0, 1})
    for (int threads : {1, 2}) row(bf16, threads, 0);
  row(0, 2, 1);
}

}  // namespace

// dtype (0 f32, 1 bf16) x threads, fast reductions; plus f32 on 2 threads in deterministic mode, for its cost.
void configurations(benchmark::internal::Benchmark* b) {
  b->ArgNames({"dtype", "threads", "deterministic"});
  for (int dtype : {0, 1})
    for (int threads : {1, 2}) b->Args({dtype, threads, 0});
  b->Args({0, 2, 1});
}
BENCHMARK(BM_Decode)->Apply(configurations)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Prefill)->Apply(configurations)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  print_table(collector);
  benchmark::Shutdown();
  return 0;
}
