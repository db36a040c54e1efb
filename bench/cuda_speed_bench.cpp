// SPDX-License-Identifier: MIT
/**
 * @file cuda_speed_bench.cpp
 * @brief CUDA backend speed, op by op and step by step, beside limits
 *        measured on the same GPU in the same run (scripts/gpu-check.sh
 *        prints its tables).
 *
 * - Roofs: copy bandwidth, a 1 GiB device-to-device copy counted as bytes
 *   read + written (what a decode step is held to); cuBLAS peak, a bf16 ×
 *   bf16 → f32 GEMM of 8192³ with f32 accumulation, the call the model makes
 *   (what prefill is held to).
 * - Ops: each kernel of a step at the model's shapes, for one decode row
 *   (T = 1: judged in GB/s against the copy roof, counting the bytes it must
 *   move) and for a 2,048-token prefill (GEMMs judged in TFLOP/s against the
 *   cuBLAS peak). Each is launched 50 times back to back and the total
 *   divided, so launch latency hides behind the GPU's work as in a graph.
 * - Steps: forward() of a 2,048-token prefill (TFLOP/s: 2 FLOPs per weight per
 *   token, attention's QKᵀ and PV, one LM-head row) and decode steps after a
 *   1,024-token context (GB/s: the weights a step must read, perf/work.h's
 *   decode_weight_bytes, plus the f32 K and V it attends over), greedy with
 *   CUDA graphs, greedy without, and returning logits. Targets (the first GPU run's, scripts/gpu-check.sh):
 *   decode batch 1 ≥ 70% of the copy roof, prefill ≥ 60% of the cuBLAS peak.
 * Figures are medians of timed runs after a warm-up; each ends synchronised.
 *
 * Run: build/bench/bench_cuda_speed [--preset NAME] [--quick]
 * (--quick: small roofs and few runs, a smoke test of the same code).
 * Exits 1 with a clear message where there is no CUDA device.
 */
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "cuda/cuda_model.h"
#include "cuda/device_memory.h"
#include "cuda/device_probe.h"
#include "cuda/gemm.h"
#include "cuda/ops.h"
#include "model/model.h"
#include "model/rope_freq.h"
#include "perf/machine.h"
#include "perf/work.h"

namespace {

using namespace servelab;

constexpr int kPrefill = 2048, kContext = 1024, kDecodeSteps = 32, kOpLaunches = 50;

struct Settings {
  std::string preset = "qwen2.5-1.5b";
  bool quick = false;
  int reps() const { return quick ? 1 : 5; }
};

// Median seconds of @p reps calls of @p fn after one warm-up; @p fn must end synchronised.
double median_seconds(int reps, const std::function<void()>& fn) { return summarize(time_runs(1, reps, fn)).median; }

// Seconds of one launch of @p op: kOpLaunches back to back, then one wait.
double op_seconds(int reps, const std::function<void()>& op) {
  return median_seconds(reps,
                        [&] {
                          for (int i = 0; i < kOpLaunches; ++i) op();
                          cuda::synchronize();
                        }) /
         kOpLaunches;
}

struct Roofs {
  double copy_gbs = 0, peak_tflops = 0;
};

// One table row: what ran, its time, and what it achieved against its roof.
void row(const char* phase, const std::string& what, double seconds, double flops, double bytes, const Roofs& roofs,
         bool compute_bound) {
  const double tflops = flops / seconds / 1e12, gbs = bytes / seconds / 1e9;
  if (compute_bound)
    std::printf("| %s | %s | %.3f | %.1f TFLOP/s | %.1f%% of cuBLAS peak |\n", phase, what.c_str(), seconds * 1e3,
                tflops, 100.0 * tflops / roofs.peak_tflops);
  else
    std::printf("| %s | %s | %.4f | %.0f GB/s | %.1f%% of copy |\n", phase, what.c_str(), seconds * 1e3, gbs,
                100.0 * gbs / roofs.copy_gbs);
  std::fflush(stdout);
}

// Every op of a step at the model's shapes; T = 1 judged by bytes, T = kPrefill GEMMs by FLOPs.
void op_table(const Settings& set, const ModelConfig& c, const Roofs& roofs) {
  std::printf("\n### Ops (%s, bf16 weights, f32 activations)\n\n", c.name.c_str());
  std::printf("| phase | op | ms | achieved | of roof |\n|---|---|---:|---:|---:|\n");
  const int H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size, V = c.vocab_size;
  const int QKV = Q + 2 * KV, Tmax = set.quick ? 256 : kPrefill;
  const auto dev = [](std::size_t floats) {
    Tensor t = cuda::device_empty(DType::F32, {static_cast<std::int64_t>(floats)});
    cuda::fill_bytes(t.data, 0, t.nbytes());
    return t;
  };
  const auto weight = [](std::int64_t n, std::int64_t k) {
    Tensor w = cuda::device_empty(DType::BF16, {n, k});
    cuda::fill_bytes(w.data, 0x3c, w.nbytes());  // 0x3c3c ≈ 0.0115: finite, no denormals
    return w;
  };
  const Tensor w_qkv = weight(QKV, H), w_o = weight(H, Q), w_gu = weight(2 * F, H), w_down = weight(H, F);
  const Tensor w_lm = weight(V, H), norm_w = dev(H), inv = dev(c.head_dim / 2);
  const std::size_t T = static_cast<std::size_t>(Tmax);
  Tensor x = dev(T * H), y = dev(T * H), in = dev(T * std::max(H, F)), qkv = dev(T * QKV), gu = dev(T * 2 * F);
  Tensor out = dev(T * std::max({H, Q, 2 * F})), logits = dev(static_cast<std::size_t>(V)), tokens = dev(1);
  cuda::Gemm gemm;
  const double w2 = 2.0;  // bytes per bf16 weight
  struct G {
    const char* name;
    const Tensor* w;
  };
  for (const G& g : {G{"qkv_proj", &w_qkv}, G{"o_proj", &w_o}, G{"gate_up_proj", &w_gu}, G{"down_proj", &w_down}}) {
    const double N = static_cast<double>(g.w->shape[0]), K = static_cast<double>(g.w->shape[1]);
    const double s1 = op_seconds(set.reps(), [&] { gemm.matmul_as_weight(out.as<float>(), in.data, *g.w, 1); });
    row("decode T=1", std::string(g.name) + " GEMM", s1, 2 * N * K, N * K * w2 + K * 2 + N * 4, roofs, false);
    const double sT = op_seconds(set.reps(), [&] { gemm.matmul_as_weight(out.as<float>(), in.data, *g.w, Tmax); });
    row("prefill", std::string(g.name) + " GEMM T=" + std::to_string(Tmax), sT, 2 * N * K * Tmax, 0, roofs, true);
  }
  const double s_lm = op_seconds(set.reps(), [&] { gemm.matmul_as_weight(logits.as<float>(), in.data, w_lm, 1); });
  row("decode T=1", "lm_head GEMM", s_lm, 2.0 * V * H, double(V) * H * w2 + double(V) * 4, roofs, false);
  const double s_norm = op_seconds(set.reps(), [&] {
    cuda::add_rmsnorm(x.as<float>(), y.as<const float>(), norm_w.as<const float>(), in.data, DType::BF16, 1, H, 1e-6f);
  });
  row("decode T=1", "add_rmsnorm (fused)", s_norm, 0, H * (4.0 + 4 + 4 + 2 + 4), roofs, false);
  const double s_silu =
      op_seconds(set.reps(), [&] { cuda::silu_mul_to(in.data, DType::BF16, gu.as<const float>(), 1, F); });
  row("decode T=1", "silu_mul_to (fused)", s_silu, 0, F * (8.0 + 2), roofs, false);
  const double s_arg = op_seconds(set.reps(), [&] {
    cuda::argmax_rows(reinterpret_cast<std::int32_t*>(tokens.data), logits.as<const float>(), 1, V);
  });
  row("decode T=1", "argmax over vocab", s_arg, 0, V * 4.0, roofs, false);
  // Attention and the fused prologue over a paged cache of kContext tokens (one sequence).
  const int block = 16, blocks = kContext / block + 1;
  Tensor kc = dev(static_cast<std::size_t>(blocks) * block * KV),
         vc = dev(static_cast<std::size_t>(blocks) * block * KV);
  std::vector<std::int32_t> table(blocks);
  for (int b = 0; b < blocks; ++b) table[b] = b;
  const Tensor dtable = cuda::upload(table);
  const std::vector<KVView> views = {
      {kc.as<float>(), vc.as<float>(), static_cast<std::size_t>(KV), dtable.as<const std::int32_t>(), block}};
  const std::vector<cuda::AttentionRow> rows = {{0, kContext}};
  const Tensor dviews = cuda::upload(views), drows = cuda::upload(rows);
  const cuda::AttentionHeads heads{c.num_attention_heads, c.num_key_value_heads, c.head_dim};
  const double s_pro = op_seconds(set.reps(), [&] {
    cuda::qkv_bias_rope_kv_write(qkv.as<float>(), nullptr, drows.as<const cuda::AttentionRow>(),
                                 dviews.as<const KVView>(), 1, heads, inv.as<const float>());
  });
  row("decode T=1", "bias+RoPE+KV write (fused)", s_pro, 0, QKV * 4.0 + Q * 4.0 + 2.0 * KV * 4, roofs, false);
  const std::size_t scratch = cuda::attention_scores_floats(1, heads.num_heads, kContext + 1);
  Tensor scores = dev(scratch);
  const double s_att = op_seconds(set.reps(), [&] {
    cuda::attention_naive(out.as<float>(), qkv.as<const float>(), QKV, drows.as<const cuda::AttentionRow>(),
                          dviews.as<const KVView>(), 1, kContext + 1, heads, scores.as<float>(), scratch);
  });
  row("decode T=1", "attention_naive, " + std::to_string(kContext) + " keys", s_att, 4.0 * (kContext + 1) * Q,
      2.0 * (kContext + 1) * KV * 4, roofs, false);
}

// Whole steps through Model / CudaModel.
void step_table(const Settings& set, const ModelConfig& c, const Roofs& roofs) {
  std::fprintf(stderr, "building %s with synthetic bf16 weights and uploading them ...\n", set.preset.c_str());
  ThreadPool pool(0);
  CudaModel model(c, synthetic_weights(c, 0, pool, DType::BF16), rope_inv_freq(c));
  std::printf("\n### Steps (%s, bf16 weights)\n\n", c.name.c_str());
  std::printf("| phase | step | ms | achieved | of roof |\n|---|---|---:|---:|---:|\n");
  const int prefill_len = set.quick ? 256 : kPrefill;
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(std::max(prefill_len, kContext)));
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::int32_t>((i * 7919 + 13) % c.vocab_size);
  const int block = 16, per_seq = (std::max(prefill_len, kContext) + kDecodeSteps + block) / block;
  constexpr int kBatch = 16;
  auto cache = model.make_kv_cache(per_seq * kBatch, block);
  const auto table_of = [&](int seq) {
    std::vector<std::int32_t> t(static_cast<std::size_t>(per_seq));
    for (int b = 0; b < per_seq; ++b) t[b] = seq * per_seq + b;
    return t;
  };
  {
    Batch prefill;
    prefill.add(table_of(0), 0, std::span(prompt).first(static_cast<std::size_t>(prefill_len)));
    const double s = median_seconds(set.reps(), [&] { model.forward_greedy(prefill, *cache); });
    const double params = static_cast<double>(c.num_hidden_layers) *
                          (double(c.hidden_size) * (c.q_dim() + 2 * c.kv_dim()) + double(c.q_dim()) * c.hidden_size +
                           3.0 * c.hidden_size * c.intermediate_size);
    const double flops =
        2.0 * params * prefill_len + attention_flops(c, 0, prefill_len) + 2.0 * c.vocab_size * c.hidden_size;
    row("prefill", std::to_string(prefill_len) + " tokens", s, flops, 0, roofs, true);
  }
  // Decode: batch B at context kContext; each run refills the context, then times kDecodeSteps steps.
  struct Mode {
    const char* name;
    int batch;
    bool greedy, graphs;
  };
  for (const Mode& m :
       {Mode{"batch 1, greedy, CUDA graph", 1, true, true}, Mode{"batch 1, greedy, no graph", 1, true, false},
        Mode{"batch 1, logits to host, graph", 1, false, true},
        Mode{"batch 16, greedy, CUDA graph", kBatch, true, true}}) {
    model.set_graphs(m.graphs);
    std::vector<double> per_step;
    for (int run = 0; run <= set.reps(); ++run) {
      for (int sq = 0; sq < m.batch; ++sq) {  // one sequence per fill step: within the planned step size
        Batch fill;
        fill.add(table_of(sq), 0, std::span(prompt).first(kContext), LogitsFor::None);
        model.forward(fill, *cache);
      }
      const double start = now_seconds();
      for (int step = 0; step < kDecodeSteps; ++step) {
        Batch one;
        const std::int32_t token = 1;
        for (int sq = 0; sq < m.batch; ++sq) one.add(table_of(sq), kContext + step, std::span(&token, 1));
        if (m.greedy)
          model.forward_greedy(one, *cache);
        else
          model.forward(one, *cache);
      }
      if (run > 0) per_step.push_back((now_seconds() - start) / kDecodeSteps);
    }
    const double s = summarize(per_step).median;
    const double kv =
        static_cast<double>(kv_bytes_per_token(c, DType::F32)) * (kContext + kDecodeSteps / 2.0) * m.batch;
    row("decode", std::string(m.name) + ", context " + std::to_string(kContext), s, 0,
        static_cast<double>(decode_weight_bytes(c, DType::BF16)) + kv, roofs, false);
  }
  const CudaStepStats& st = model.stats();
  std::printf("\nsteps %ld, buffer growths %ld (at make_kv_cache and reserve only when 1), graph replays %ld\n",
              st.steps, st.plan_growths, st.graph_replays);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace servelab;
  Settings set;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick")
      set.quick = true;
    else if (arg == "--preset" && i + 1 < argc)
      set.preset = argv[++i];
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
    std::fprintf(stderr, "measuring device copy bandwidth and cuBLAS bf16 peak ...\n");
    Roofs roofs;
    roofs.copy_gbs = measure_gpu_copy_gbs(set.quick ? 22 : 28, set.reps());
    roofs.peak_tflops = measure_gpu_gemm_tflops(set.quick ? 1024 : 8192, set.reps());
    std::printf("\n## CUDA backend speed, %s shape, bf16 weights (synthetic)%s\n\n", set.preset.c_str(),
                set.quick ? ", --quick" : "");
    std::printf("device: %s\n", cuda::device_name().c_str());
    std::printf("roofs measured in this run: D2D copy %.0f GB/s (read + write), cuBLAS bf16 GEMM %d^3 %.1f TFLOP/s\n",
                roofs.copy_gbs, set.quick ? 1024 : 8192, roofs.peak_tflops);
    std::printf("targets: decode batch 1 >= 70%% of copy, prefill %d >= 60%% of cuBLAS peak\n", kPrefill);
    op_table(set, c, roofs);
    step_table(set, c, roofs);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_cuda_speed: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
