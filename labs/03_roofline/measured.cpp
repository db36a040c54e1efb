// SPDX-License-Identifier: MIT
/**
 * @file measured.cpp
 * @brief Lab 03's measured tables: this machine's roofs (best of three) and
 *        real prefill and decode steps, their work counted by the engine and
 *        compared with the closed form, their time measured (lab03.h).
 * @see labs/03_roofline/README.md
 */
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/thread_pool.h"
#include "cuda/device_probe.h"
#include "kernels/cpu/rows.h"
#include "kv/kv_cache.h"
#include "lab03.h"
#include "perf/machine.h"

namespace servelab::lab03 {

using namespace servelab::lab;

MachineRoofs measure_machine(int threads) {
  ThreadPool one(1), all(threads);
  MachineRoofs r;
  // Compute roofs from the engine's own FMA loop, not a library's GEMM: a library that falls back to
  // slow kernels on an unknown CPU would lower the roof together with the points measured against it.
  const std::string all_threads = " (" + std::to_string(threads) + " threads)";
  std::vector<RoofSamples>& repeats = r.repeats;
  repeats = {{"f32 FMA (1 thread)", {}}, {"f32 FMA" + all_threads, {}}, {"read (1 thread)", {}},
             {"read" + all_threads, {}}, {"triad (1 thread)", {}},      {"triad" + all_threads, {}}};
  double& bf16N = r.bf16N;
  for (int i = 0; i < 3; ++i) {  // best of three: roofs are the most the machine can do
    repeats[0].samples.push_back(measure_peak_gflops(one, PeakOp::F32Fma));
    repeats[1].samples.push_back(measure_peak_gflops(all, PeakOp::F32Fma));
    bf16N = std::max(bf16N, measure_peak_gflops(all, PeakOp::Bf16Dot));  // 0 without AVX512_BF16: no spread
    repeats[2].samples.push_back(measure_read_gbs(one));
    repeats[3].samples.push_back(measure_read_gbs(all));
    repeats[4].samples.push_back(measure_triad_gbs(one));
    repeats[5].samples.push_back(measure_triad_gbs(all));
  }
  const auto best = [&](int i) { return summarize(repeats[i].samples).max; };
  r.fma1 = best(0), r.fmaN = best(1), r.read1 = best(2), r.readN = best(3), r.triad1 = best(4), r.triadN = best(5);
  return r;
}

// 3. This machine's roofs, measured now, beside the datasheets: the roofs every point below is placed under.
Table roofs_table(const MachineRoofs& r, int threads) {
  const double fma1 = r.fma1, fmaN = r.fmaN, read1 = r.read1, readN = r.readN, triad1 = r.triad1, triadN = r.triadN,
               bf16N = r.bf16N;
  Table roofs{.name = "roofs",
              .title = "Roofs: datasheets and this machine (measured now)",
              .columns = {"hardware", "peak GFLOP/s", "fp32 GFLOP/s", "bandwidth GB/s", "memory GB",
                          Column{"ridge [FLOP/B]", 1}, "source"}};
  for (const Hardware& h : gpu_catalog())
    roofs.add_row(
        {h.name, h.matrix_tflops * 1e3, h.fp32_tflops * 1e3, h.bandwidth_gbs, h.memory_gb, h.ridge(), h.source});
  const auto machine = Report::machine_metadata();
  const std::string cpu = machine["cpu"].get<std::string>();
  roofs.add_row({"this CPU, 1 thread", fma1, fma1, read1, 0.0, fma1 / read1,
                 std::string("measured: f32 FMA chains (") + cpu::isa_name(cpu::active_isa()) + "), streaming read"});
  roofs.add_row({"this CPU, " + std::to_string(threads) + " threads", std::max(fmaN, bf16N), fmaN, readN, 0.0,
                 fmaN / readN,
                 std::string("measured: same, all threads") + (bf16N > 0 ? "; peak = bf16 dot (vdpbf16ps)" : "") +
                     "; STREAM triad " + fixed(triadN, 1) + " GB/s (1 thread " + fixed(triad1, 1) + ")"});
  if (cuda_device_count() > 0) {  // a GPU is here: its roofs, measured like the CPU's
    const double copy = measure_gpu_copy_gbs(), tflops = measure_gpu_gemm_tflops();
    roofs.add_row({"this GPU", tflops * 1e3, 0.0, copy, 0.0, tflops * 1e3 / copy,
                   std::string("measured: cuBLAS bf16 8192^3 GEMM, device-to-device copy (read + write); ") +
                       cuda_device_summary()});
  }
  roofs.note =
      "GPU peaks are dense fp16/bf16 tensor-core rates (no sparsity); the CPU's are the engine's own "
      "microbenchmark (perf/machine.h): independent FMA chains on the widest vector unit, and bf16 dot "
      "products where the CPU has AVX512_BF16. Ridges use fp32, the precision the engine computes in. "
      "Bandwidth: GB = 10^9 bytes.";

  return roofs;
}

MeasuredSteps measure_steps(Model& model, const LabOptions& o, const std::vector<int>& prefill_lens,
                            const std::vector<int>& decode_batches, int context, double ridge_here) {
  const ModelConfig& c = model.config();
  const StepDtypes engine_dtypes{model.options().weight_dtype, DType::F32, DType::F32};
  Table points{.name = "measured_points",
               .title = "Measured steps on this machine (" + c.name + ", " + o.dtype + " weights)",
               .columns = {"point", "tokens", Column{"GFLOP", 3}, Column{"GB moved", 3},
                           Column{"intensity [FLOP/B]", 2}, Column{"time [ms]", 2}, Column{"achieved GFLOP/s", 1},
                           Column{"achieved GB/s", 1}, "bound here", "counted = formula"}};
  MeasuredSteps out;
  std::vector<std::pair<Work, double>>& calibration = out.calibration;
  std::vector<std::string>& names = out.names;
  std::string& mismatch = out.mismatch;
  auto measure = [&](const std::string& name, int tokens, const std::vector<SeqShape>& shapes) {
    auto cache_ptr =
        model.make_kv_cache(static_cast<int>(shapes.size()), context + 1 + (shapes[0].cached == 0 ? tokens : 0));
    KVCache& cache = *cache_ptr;
    auto make_batch = [&] {
      Batch batch;
      for (std::size_t s = 0; s < shapes.size(); ++s) {
        std::vector<std::int32_t> ids(static_cast<std::size_t>(shapes[s].fresh));
        for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7 + s) % c.vocab_size);
        batch.add({static_cast<std::int32_t>(s)}, static_cast<int>(shapes[s].cached), ids);
      }
      return batch;
    };
    const Batch batch = make_batch();
    model.work_counter().reset();
    model.work_counter().enable(true);
    model.forward(batch, cache);
    model.work_counter().enable(false);
    const Work formula = step_work(c, engine_dtypes, shapes, static_cast<std::int64_t>(shapes.size()));
    // Model::forward counts before it dispatches to a backend, so a CUDA step is counted too.
    const Work counted = model.work_counter().total();
    const bool equal = std::abs(counted.flops - formula.flops) <= 1e-9 * formula.flops &&
                       std::abs(counted.bytes() - formula.bytes()) <= 1e-9 * formula.bytes();
    if (!equal && mismatch.empty())
      mismatch = name + ": counted " + fixed(counted.flops, 0) + " FLOP / " + fixed(counted.bytes(), 0) +
                 " B, the closed form " + fixed(formula.flops, 0) + " / " + fixed(formula.bytes(), 0);
    const Summary t = summarize(time_runs(o.warmup, o.repeats, [&] { model.forward(batch, cache); }));
    points.add_row(
        {name, static_cast<long long>(tokens), counted.flops / 1e9, counted.bytes() / 1e9, counted.intensity(),
         t.median * 1e3, counted.flops / t.median / 1e9, counted.bytes() / t.median / 1e9,
         std::string(bound_name(bound_of(counted.intensity(), ridge_here))), std::string(equal ? "yes" : "no")});
    calibration.push_back({counted, t.median});
    names.push_back(name);
  };
  {
    Progress bar("measuring steps", static_cast<long>(prefill_lens.size() + decode_batches.size()));
    for (int L : prefill_lens) {
      measure("prefill " + std::to_string(L), L, {{0, L}});
      bar.advance();
    }
    for (int B : decode_batches) {
      measure("decode B=" + std::to_string(B), B, std::vector<SeqShape>(B, SeqShape{context, 1}));
      bar.advance();
    }
  }
  points.note =
      "Work counted by the engine op by op (Model::work_counter()) and compared with the closed form. "
      "Decode steps: each sequence has " +
      std::to_string(context) + " tokens cached.";
  out.points = std::move(points);
  return out;
}

}  // namespace servelab::lab03
