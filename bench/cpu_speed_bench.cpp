// SPDX-License-Identifier: MIT
/**
 * @file cpu_speed_bench.cpp
 * @brief CPU speed of the engine against limits measured in the same run.
 *
 * For the qwen2.5-0.5b shape (synthetic weights), at 1 and 2 threads, f32 and
 * bf16 weights (bf16 widened to f32, and bf16 arithmetic, bf16_activations),
 * with the attention `servelab serve` runs (flash prefill, split-K decode):
 * - decode tokens/s at batch 1, context 128, beside the streaming-read
 *   bandwidth: fraction = weight bytes per token × tokens/s ÷ bandwidth;
 * - prefill tokens/s for a 512-token prompt, beside the engine's own
 *   peak-FLOP loop (perf/machine.h: f32 FMA chains, or bf16 dot products for
 *   bf16 arithmetic): fraction = model FLOPs per token × tokens/s ÷ peak.
 *   The roof is never a library GEMM, so a library that falls back to slow
 *   kernels shows as a low fraction; the GEMM path and the library's kernel
 *   name are printed beside it.
 * - one sampled token (BM_Sample) over SmolLM2's vocabulary at temperature 1,
 *   the OpenAI default a serving client gets when it sends none;
 * - the layers' GEMMs at a batch of M rows (a step of M decodes, or a short
 *   prefill) on the row kernels and on the library fast mode uses above
 *   rows_kernel_max_m() (BM_BatchGemm): the table says whether the row
 *   kernels are the faster of the two up to that size and the library above it.
 * The limits are measured between the timed iterations of each figure (the
 * median of those runs is reported), because this machine's bandwidth and
 * clock swing over minutes. The table is printed last.
 *
 * Run: build/bench/bench_cpu_speed [--benchmark_repetitions=3]
 */
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/rows.h"
#include "kernels/gemm.h"
#include "kernels/gemm_dnnl.h"
#include "core/random.h"
#include "model/model.h"
#include "model/sampler.h"
#include "perf/machine.h"
#include "perf/work.h"
#include "core/stats.h"

namespace {

using namespace servelab;

constexpr const char* kPreset = "qwen2.5-0.5b";
constexpr int kPrompt = 512, kContext = 128;
// Batch sizes for BM_BatchGemm: decode batches around the row kernels' limit (rows_kernel_max_m()).
constexpr int kBatchRows[] = {4, 16, 24, 32, 48, 64, 128};

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

// The benchmark's weight settings: f32, bf16 widened to f32, bf16 in bf16 arithmetic.
enum Weights { kF32 = 0, kBf16 = 1, kBf16Math = 2 };
DType dtype_of(std::int64_t w) { return w == kF32 ? DType::F32 : DType::BF16; }
const char* weights_name(int w) { return w == kF32 ? "f32" : w == kBf16 ? "bf16" : "bf16 math"; }

std::unique_ptr<Model> model(std::int64_t w, int threads, bool deterministic) {
  ModelOptions options;
  options.num_threads = threads;
  options.weight_dtype = dtype_of(w);
  options.deterministic = deterministic;
  options.bf16_activations = w == kBf16Math;
  options.attention = AttentionKind::FLASH;  // what `servelab serve` runs (apps/servelab/engine_flags.h)
  return std::make_unique<Model>(preset(kPreset), weights(dtype_of(w)), options);
}

// The compute roof of a prefill: bf16 dot products where the GEMMs run in bf16, else f32 FMA.
PeakOp roof_op(std::int64_t w) {
  const bool bf16_math = w == kBf16Math && dnnl_bf16_arithmetic();
  return bf16_math ? PeakOp::Bf16Dot : PeakOp::F32Fma;
}

// The limits are measured between the timed iterations, so figure and limit see the same machine state.
void BM_Decode(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(1));
  auto m = model(state.range(0), threads, state.range(2) != 0);
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
  const int threads = static_cast<int>(state.range(1));
  auto m = model(state.range(0), threads, state.range(2) != 0);
  ThreadPool pool(threads);
  std::vector<std::int32_t> prompt(kPrompt);
  std::iota(prompt.begin(), prompt.end(), 0);
  HostKVCache cache(m->config(), 1, kPrompt);
  std::vector<double> limits;
  for (auto _ : state) {
    state.PauseTiming();
    limits.push_back(measure_peak_gflops(pool, roof_op(state.range(0))));
    state.ResumeTiming();
    Batch batch;
    batch.add({0}, 0, prompt);
    benchmark::DoNotOptimize(m->forward(batch, cache));
  }
  state.counters["tok/s"] = benchmark::Counter(kPrompt, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak GFLOP/s"] = summarize(limits).median;
}

// One sampled token over SmolLM2's 49,152-id vocabulary with the OpenAI defaults (temperature 1, no top-k or
// top-p): what a serving step does per row when the client sends no temperature, as aiperf does. The logits are
// normal with a spread of 2, and 16 ids 12 above the rest hold about 88% of the mass: SmolLM2's own draws at
// T = 1 (200 tokens of a story) stopped within the first 64 ranks 88% of the time, and once past 1,000.
void BM_Sample(benchmark::State& state) {
  SplitMix64 rng(7);
  std::vector<float> logits(49152);
  for (float& l : logits) l = static_cast<float>(2.0 * rng.normal());
  for (int i = 0; i < 16; ++i) logits[i * 3001] += 12.0f;
  Sampler sampler(SamplingParams{.temperature = 1.0f, .seed = 1});
  for (auto _ : state) benchmark::DoNotOptimize(sampler.sample(logits));
}

// The layer matrices of the preset (no LM head) multiplied by M input rows, on the row kernels (path 0) or on
// the library GEMM fast mode hands larger M to (path 1: oneDNN where built, else OpenBLAS). Where the two cross
// is what rows_kernel_max_m() should be on this CPU.
void BM_BatchGemm(benchmark::State& state) {
  const DType dtype = dtype_of(state.range(0));
  const int M = static_cast<int>(state.range(1));
  const bool library = state.range(2) != 0;
  ThreadPool pool(2);
  const KernelContext ctx{.pool = &pool};
  const ModelWeights& w = weights(dtype);
  const ModelConfig config = preset(kPreset);
  std::vector<float> x(static_cast<std::size_t>(M) * config.intermediate_size, 0.01f);
  std::vector<float> out(static_cast<std::size_t>(M) * config.intermediate_size);
  double flops = 0.0;
  for (auto _ : state) {
    flops = 0.0;
    for (const LayerWeights& layer : w.layers)
      for (const Tensor* t : {&layer.q_proj, &layer.k_proj, &layer.v_proj, &layer.o_proj, &layer.gate_proj,
                              &layer.up_proj, &layer.down_proj}) {
        if (!library)
          matmul_rows(ctx, out.data(), x.data(), *t, M);
        else if (dnnl_available())
          matmul_dnnl(ctx, out.data(), x.data(), *t, M);
        else
          matmul_blas(ctx, out.data(), x.data(), *t, M);
        flops += 2.0 * M * static_cast<double>(t->numel());
      }
  }
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// Keeps each run's counters so the summary table can set figures beside their limits.
class Collector : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> value;  // "name" -> counter, the last (or mean) run wins
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      for (const auto& [name, counter] : r.counters)
        value[r.run_name.function_name + "/" + r.run_name.args + ":" + name] = counter;
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
  std::printf(
      "Instruction set %s; OpenBLAS core %s; oneDNN %s. Roofs: streaming read (decode), the engine's own "
      "peak-FLOP loop (prefill: f32 FMA, or bf16 dot for bf16 math), measured between the timed runs.\n\n",
      cpu::isa_name(cpu::active_isa()), openblas_core_name().c_str(),
      dnnl_available() ? (dnnl_bf16_arithmetic() ? "with bf16 arithmetic" : "without bf16 arithmetic") : "not used");
  std::printf(
      "| weights | threads | decode tok/s | GB/s | stream GB/s | of roof | prefill tok/s | GFLOP/s | peak GFLOP/s | of "
      "roof | prefill GEMM |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  auto row = [&](int w, int threads, int deterministic) {
    const std::string args = "/weights:" + std::to_string(w) + "/threads:" + std::to_string(threads) +
                             "/deterministic:" + std::to_string(deterministic) + ":";
    const double decode = get("BM_Decode" + args + "tok/s"), prefill = get("BM_Prefill" + args + "tok/s");
    if (decode == 0.0 && prefill == 0.0) return;  // filtered out (--benchmark_filter)
    const double stream = get("BM_Decode" + args + "stream GB/s"), peak = get("BM_Prefill" + args + "peak GFLOP/s");
    const double gbs = decode * decode_weight_bytes(config, dtype_of(w)) / 1e9;
    const double gflops = prefill * (layer_matrix_flops + attn_per_token) / 1e9;
    // Which GEMM the prefill's largest projection (MLP gate/up, 512 rows) ran on, and the library's kernel.
    ThreadPool pool(threads);
    const KernelContext ctx{.pool = &pool, .deterministic = deterministic != 0, .bf16_activations = w == kBf16Math};
    const std::string gemm =
        std::string(gemm_path_name(matmul_path(ctx, dtype_of(w), kPrompt))) + ": " +
        matmul_kernel_name(ctx, dtype_of(w), kPrompt, 2 * config.intermediate_size, config.hidden_size);
    std::printf("| %s%s | %d | %.1f | %.1f | %.1f | %.0f%% | %.0f | %.0f | %.0f | %.0f%% | %s |\n", weights_name(w),
                deterministic ? " deterministic" : "", threads, decode, gbs, stream, 100.0 * gbs / stream, prefill,
                gflops, peak, 100.0 * gflops / peak, gemm.c_str());
  };
  for (int w : {kF32, kBf16, kBf16Math})
    for (int threads : {1, 2}) row(w, threads, 0);
  row(kF32, 2, 1);

  // The crossover: below rows_kernel_max_m() the row kernels should win, above it the library.
  ThreadPool pool(2);
  const KernelContext fast{.pool = &pool};
  std::printf("\n### The layers' GEMMs at a batch of M rows, 2 threads (GFLOP/s)\n\n");
  std::printf("| weights | M | row kernels | %s | faster | fast mode takes | held |\n",
              dnnl_available() ? "oneDNN" : "OpenBLAS");
  std::printf("|---|---:|---:|---:|---|---|---|\n");
  for (int w : {kF32, kBf16})
    for (int M : kBatchRows) {
      const std::string args = "/weights:" + std::to_string(w) + "/rows:" + std::to_string(M) + "/library:";
      const double rows = get("BM_BatchGemm" + args + "0:GFLOP/s"), lib = get("BM_BatchGemm" + args + "1:GFLOP/s");
      if (rows == 0.0 || lib == 0.0) continue;
      const bool rows_faster = rows >= lib;
      const bool takes_rows = matmul_path(fast, dtype_of(w), M) == GemmPath::Rows;
      // Within 10% either choice is as good: the two runs are minutes apart on a machine whose speed drifts.
      const bool held = takes_rows == rows_faster || std::abs(rows - lib) <= 0.1 * std::max(rows, lib);
      std::printf("| %s | %d | %.0f | %.0f | %s | %s | %s |\n", weights_name(w), M, rows, lib,
                  rows_faster ? "rows" : "library", takes_rows ? "rows" : "library",
                  held ? "yes" : "no: rows_kernel_max_m() does not fit this CPU");
    }
}

}  // namespace

// weights (f32, bf16, bf16 math) x threads, fast reductions; plus f32 on 2 threads in deterministic mode, for its cost.
void configurations(benchmark::internal::Benchmark* b) {
  b->ArgNames({"weights", "threads", "deterministic"});
  for (int w : {kF32, kBf16, kBf16Math})
    for (int threads : {1, 2}) b->Args({w, threads, 0});
  b->Args({kF32, 2, 1});
}
BENCHMARK(BM_Decode)->Apply(configurations)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Prefill)->Apply(configurations)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sample)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BatchGemm)
    ->ArgNames({"weights", "rows", "library"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int w : {kF32, kBf16})
        for (int M : kBatchRows)
          for (int library : {0, 1}) b->Args({w, M, library});
    })
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  print_table(collector);
  benchmark::Shutdown();
  return 0;
}
