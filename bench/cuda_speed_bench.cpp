/**
 * @file cuda_speed_bench.cpp
 * @brief CUDA backend speed on the qwen2.5-0.5b shape in bf16 (synthetic
 *        weights), beside limits measured on the same GPU in the same run.
 *
 * - Copy bandwidth: a 1 GiB device-to-device cudaMemcpy, counted as bytes
 *   read + bytes written. The roof a decode step is held to.
 * - cuBLAS peak: a bf16 × bf16 → f32 GEMM of 8192³ with f32 accumulation,
 *   the same cublasGemmEx call the model makes. The roof prefill is held to.
 * - Prefill: one forward() over a 512-token prompt; achieved TFLOP/s counts
 *   2 FLOPs per weight per token of every layer matrix, attention's QKᵀ and
 *   PV, and the LM head's one row.
 * - Decode: forward() steps of one token after a 128-token prompt; achieved
 *   GB/s counts the weights a step must read (perf/work.h's
 *   decode_weight_bytes) plus the f32 K and V it attends over.
 * Each figure is the median of several timed runs after a warm-up; every
 * forward() ends with its logits copied to the host, so it is synchronous.
 * The Markdown table is printed last (scripts/gpu-check.sh shows it).
 *
 * Run: build/bench/bench_cuda_speed [--preset NAME] [--quick]
 * (--quick: smaller roofs' buffers and fewer runs, for a smoke test).
 * Exits 1 with a clear message where there is no CUDA device.
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/timer.h"
#include "cuda/device_memory.h"
#include "cuda/gemm.h"
#include "cuda/device_probe.h"
#include "model/model.h"
#include "perf/machine.h"
#include "perf/work.h"
#include "core/stats.h"

namespace {

using namespace servelab;

constexpr int kPrompt = 512, kContext = 128, kDecodeSteps = 64;

/// What to run: the full measurement, or a quick smoke test of the same code.
struct Settings {
  std::string preset = "qwen2.5-0.5b";
  bool quick = false;
  int reps() const { return quick ? 1 : 5; }
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Median seconds of @p reps calls of @p fn after one warm-up; @p fn must end synchronised.
double median_seconds(int reps, const std::function<void()>& fn) { return summarize(time_runs(1, reps, fn)).median; }

// The roofs, from perf/machine.h: 1 GiB copy and an 8192³ GEMM (16 MiB and 1024³ when quick).
double copy_gbs(const Settings& set) { return measure_gpu_copy_gbs(set.quick ? 22 : 28, set.reps()); }
double gemm_tflops(const Settings& set) { return measure_gpu_gemm_tflops(set.quick ? 1024 : 8192, set.reps()); }

struct Figures {
  double copy_gbs = 0, peak_tflops = 0;
  double prefill_s = 0, prefill_tflops = 0;
  double decode_s = 0, decode_gbs = 0;
};

Figures run(const Settings& set, const ModelConfig& c) {
  Figures f;
  std::fprintf(stderr, "measuring device copy bandwidth and cuBLAS bf16 peak ...\n");
  f.copy_gbs = copy_gbs(set);
  f.peak_tflops = gemm_tflops(set);

  std::fprintf(stderr, "building %s with synthetic bf16 weights and uploading them ...\n", set.preset.c_str());
  EngineOptions options;
  options.backend = Backend::CUDA;
  options.weight_dtype = DType::BF16;
  auto model = Model::from_preset(set.preset, 0, options);

  std::vector<std::int32_t> prompt(kPrompt);
  for (int i = 0; i < kPrompt; ++i) prompt[i] = (i * 7919 + 13) % c.vocab_size;
  auto cache = model->make_kv_cache(1, kPrompt);
  Batch prefill;
  prefill.add({0}, 0, prompt);
  f.prefill_s = median_seconds(set.reps(), [&] { model->forward(prefill, *cache); });
  const double layer_matrix_params = static_cast<double>(c.num_hidden_layers) *
      (static_cast<double>(c.hidden_size) * (c.q_dim() + 2 * c.kv_dim()) + static_cast<double>(c.q_dim()) * c.hidden_size +
       3.0 * c.hidden_size * c.intermediate_size);
  const double prefill_flops = 2.0 * layer_matrix_params * kPrompt + attention_flops(c, 0, kPrompt) +
                               2.0 * c.vocab_size * c.hidden_size;
  f.prefill_tflops = prefill_flops / f.prefill_s / 1e12;

  // Decode: fill 128 tokens, then time steps at positions 128, 129, ...; the first run warms up.
  std::fprintf(stderr, "timing decode at context %d ...\n", kContext);
  auto decode_cache = model->make_kv_cache(1, kContext + kDecodeSteps);
  const std::int32_t token = 1;
  std::vector<double> per_step;
  for (int run = 0; run <= set.reps(); ++run) {
    Batch fill;
    fill.add({0}, 0, std::span(prompt).first(kContext));
    model->forward(fill, *decode_cache);
    const auto start = std::chrono::steady_clock::now();
    for (int step = 0; step < kDecodeSteps; ++step) {
      Batch one;
      one.add({0}, kContext + step, std::span(&token, 1));
      model->forward(one, *decode_cache);
    }
    if (run > 0) per_step.push_back(seconds_since(start) / kDecodeSteps);
  }
  f.decode_s = summarize(per_step).median;
  const double kv_read = 2.0 * c.num_hidden_layers * c.kv_dim() * (kContext + kDecodeSteps / 2.0) * sizeof(float);
  f.decode_gbs = (static_cast<double>(decode_weight_bytes(c, DType::BF16)) + kv_read) / f.decode_s / 1e9;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace servelab;
  Settings set;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") set.quick = true;
    else if (arg == "--preset" && i + 1 < argc) set.preset = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_cuda_speed [--preset NAME] [--quick]\n");
      return 1;
    }
  }
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_cuda_speed: no CUDA device (%s)\n", cuda_device_summary().c_str());
    return 1;
  }
  try {
    const ModelConfig c = preset(set.preset);
    const Figures f = run(set, c);
    std::printf("\n## CUDA backend speed, %s shape, bf16 weights (synthetic)%s\n\n", set.preset.c_str(),
                set.quick ? ", --quick" : "");
    std::printf("device: %s\n", cuda::device_name().c_str());
    std::printf("roofs measured in this run: D2D copy %.0f GB/s (read + write), cuBLAS bf16 GEMM %d^3 %.1f TFLOP/s\n\n",
                f.copy_gbs, set.quick ? 1024 : 8192, f.peak_tflops);
    std::printf("| phase | tokens/step | ms/step | tokens/s | achieved | roof | of roof |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
    std::printf("| prefill, %d-token prompt | %d | %.2f | %.0f | %.1f TFLOP/s | %.1f TFLOP/s | %.1f%% |\n", kPrompt,
                kPrompt, f.prefill_s * 1e3, kPrompt / f.prefill_s, f.prefill_tflops, f.peak_tflops,
                100.0 * f.prefill_tflops / f.peak_tflops);
    std::printf("| decode, context %d | 1 | %.3f | %.0f | %.0f GB/s | %.0f GB/s | %.1f%% |\n", kContext,
                f.decode_s * 1e3, 1.0 / f.decode_s, f.decode_gbs, f.copy_gbs, 100.0 * f.decode_gbs / f.copy_gbs);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_cuda_speed: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
