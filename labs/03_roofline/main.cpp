// SPDX-License-Identifier: MIT
/**
 * @file main.cpp
 * @brief Lab 03 — the roofline: count every FLOP and byte of a step, place
 *        prefill and decode against this machine's roofs and the GPUs', and
 *        calibrate the cost model that later labs simulate with.
 *
 * The configuration is lab 02's (KV cache on); what this lab adds is
 * measurement: the engine's WorkCounter, this machine's measured peaks, and
 * perf/cost_model.h.
 * @see labs/03_roofline/README.md
 */
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda/device_probe.h"
#include "kernels/cpu/rows.h"
#include "kernels/gemm.h"
#include "kv/kv_cache.h"
#include "lab.h"
#include "lab03.h"
#include "perf/cost_model.h"
#include "perf/hardware.h"
#include "perf/machine.h"
#include "perf/work.h"
#include "serve/ladder.h"

using namespace servelab;
using namespace servelab::lab;
using namespace servelab::lab03;

namespace {

// This machine's roofs, each measured three times (the best is the roof), GFLOP/s and GB/s.
struct MachineRoofs {
  std::vector<RoofSamples> repeats{};  // f32 FMA, read and triad, on 1 thread and on all
  double bf16N = 0;                    // bf16 dot on all threads; 0 without AVX512_BF16
  double fma1 = 0, fmaN = 0, read1 = 0, readN = 0, triad1 = 0, triadN = 0;
};

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
              .columns = {{"hardware"},
                          {"peak GFLOP/s"},
                          {"fp32 GFLOP/s"},
                          {"bandwidth GB/s"},
                          {"memory GB"},
                          {"ridge [FLOP/B]", 1},
                          {"source"}}};
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lab 03: the roofline, measured", "lab_03_roofline"};
  LabOptions o;
  add_common_options(app, o, "qwen2.5-0.5b");
  std::vector<int> prefill_lens = {64, 128, 256, 512};
  std::vector<int> decode_batches = {1, 4, 16, 32};
  int context = 128;
  auto* lens_opt = app.add_option("--prefill-lens", prefill_lens, "prompt lengths of the measured prefill steps")
                       ->delimiter(',')
                       ->capture_default_str();
  auto* batches_opt = app.add_option("--decode-batches", decode_batches, "batch sizes of the measured decode steps")
                          ->delimiter(',')
                          ->capture_default_str();
  app.add_option("--context", context, "tokens already cached for each decoding sequence")->capture_default_str();

  return run_lab(app, argc, argv, [&] {
    if (o.quick) {
      if (lens_opt->count() == 0) prefill_lens = {16, 64};
      if (batches_opt->count() == 0) decode_batches = {1, 4};
      if (app.get_option("--preset")->count() == 0) o.preset = "small";
      quick_timing(app, o);
    }
    std::sort(prefill_lens.begin(), prefill_lens.end());  // the claims read the longest prompt and the smallest batch
    std::sort(decode_batches.begin(), decode_batches.end());
    for (int L : prefill_lens) check(L >= 1, "--prefill-lens: every length must be >= 1, got ", L);
    for (int B : decode_batches) check(B >= 1, "--decode-batches: every batch must be >= 1, got ", B);
    check(context >= 0, "--context must be >= 0, got ", context);
    // Before anything is measured: an unwritable --out should not cost a minute of measuring first.
    Report report("03_roofline", o.out);
    const Hardware& a100 = gpu("A100 80GB SXM");

    const Table article = article_table(a100), compute_use = compute_use_table(), decode_bytes = decode_bytes_table();
    const std::vector<Table> preset_tables = preset_step_tables(a100);

    // 3. This machine's roofs, measured now, beside the datasheets.
    // Lab 02's configuration: what this lab adds is measurement, not a technique.
    LabConfig base;
    base.model = model_options(o, /*deterministic=*/false);
    base.engine.max_model_len = context + 1 + *std::max_element(prefill_lens.begin(), prefill_lens.end());
    const LabConfig config = configure(Techniques::for_lab(3), base);
    auto model = load_model(o, config.model);
    const ModelConfig& c = model->config();
    const int threads = model->num_threads();
    const MachineRoofs machine_roofs = measure_machine(threads);
    const double fmaN = machine_roofs.fmaN, readN = machine_roofs.readN;
    const std::vector<RoofSamples>& repeats = machine_roofs.repeats;
    // The roofs' own repeats say whether the machine was quiet enough for the cost model's errors to mean anything.
    const std::string busy = busy_machine_warning(repeats);
    const Table roofs = roofs_table(machine_roofs, threads);

    describe_run(report, *model, o);
    record_configuration(report, "measured steps", 3, base, config);
    report.setting("technique", "lab 02's configuration (KV cache on) with the engine's FLOP/byte counters on");
    report.setting("roofs", "f32 FMA " + fixed(fmaN, 0) + " GFLOP/s, read " + fixed(readN, 1) + " GB/s on " +
                                std::to_string(threads) + " threads; ridge " + fixed(fmaN / readN, 1) + " FLOP/byte");
    double worst_spread = 0;
    for (const RoofSamples& r : repeats) worst_spread = std::max(worst_spread, relative_spread(r.samples));
    report.setting("roof repeats", "3 of each; the worst repeat within " + fixed(100 * worst_spread, 0) +
                                       "% of the best (a busy machine above " + fixed(100 * kBusySpread, 0) + "%)");
    ThreadPool all(threads);
    const KernelContext gemm_ctx{.pool = &all, .bf16_activations = model->options().bf16_activations};
    const int prefill_rows = *std::max_element(prefill_lens.begin(), prefill_lens.end());
    report.setting("prefill GEMM",
                   std::string(gemm_path_name(matmul_path(gemm_ctx, model->options().weight_dtype, prefill_rows))) +
                       ", kernel " +
                       matmul_kernel_name(gemm_ctx, model->options().weight_dtype, prefill_rows,
                                          2 * c.intermediate_size, c.hidden_size) +
                       " (" + std::to_string(prefill_rows) + " rows, MLP gate/up shape)");
    report.print_settings("Lab 03 — the roofline, measured");
    report.add_table(article);
    for (const Table& t : preset_tables) report.add_table(t);
    report.add_table(compute_use);
    report.add_table(decode_bytes);
    report.add_table(roofs);

    // 4. Real steps on this machine: counted work, measured time.
    Table points{.name = "measured_points",
                 .title = "Measured steps on this machine (" + c.name + ", " + o.dtype + " weights)",
                 .columns = {{"point"},
                             {"tokens"},
                             {"GFLOP", 3},
                             {"GB moved", 3},
                             {"intensity [FLOP/B]", 2},
                             {"time [ms]", 2},
                             {"achieved GFLOP/s", 1},
                             {"achieved GB/s", 1},
                             {"bound here"},
                             {"counted = formula"}}};
    const StepDtypes engine_dtypes{model->options().weight_dtype, DType::F32, DType::F32};
    std::vector<std::pair<Work, double>> calibration;
    std::vector<std::string> names;
    std::string mismatch;  // the first step whose counted work differs from the closed form
    const double ridge_here = fmaN / readN;
    auto measure = [&](const std::string& name, int tokens, const std::vector<SeqShape>& shapes) {
      auto cache_ptr =
          model->make_kv_cache(static_cast<int>(shapes.size()), context + 1 + (shapes[0].cached == 0 ? tokens : 0));
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
      model->work_counter().reset();
      model->work_counter().enable(true);
      model->forward(batch, cache);
      model->work_counter().enable(false);
      const Work formula = step_work(c, engine_dtypes, shapes, static_cast<std::int64_t>(shapes.size()));
      // Model::forward counts before it dispatches to a backend, so a CUDA step is counted too.
      const Work counted = model->work_counter().total();
      const bool equal = std::abs(counted.flops - formula.flops) <= 1e-9 * formula.flops &&
                         std::abs(counted.bytes() - formula.bytes()) <= 1e-9 * formula.bytes();
      if (!equal && mismatch.empty())
        mismatch = name + ": counted " + fixed(counted.flops, 0) + " FLOP / " + fixed(counted.bytes(), 0) +
                   " B, the closed form " + fixed(formula.flops, 0) + " / " + fixed(formula.bytes(), 0);
      const Summary t = summarize(time_runs(o.warmup, o.repeats, [&] { model->forward(batch, cache); }));
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
    report.add_table(points);

    // 5. The cost model, calibrated here, predicted vs measured.
    const CostModel here = CostModel::calibrate("this CPU (calibrated)", fmaN * 1e9, readN * 1e9, calibration);
    report.add_table(cost_model_table(here, fmaN, readN, calibration, names, busy));

    report.add_table(gpu_simulated_table(c, context));

    report.add_table(kv_cache_puzzle(here, engine_dtypes));

    report.add_plot({.name = "roofline",
                     .table = "measured_points",
                     .x = "intensity [FLOP/B]",
                     .y = {"achieved GFLOP/s"},
                     .title = "Lab 03: measured steps under the roofs",
                     .xlabel = "arithmetic intensity [FLOP/byte]",
                     .ylabel = "GFLOP/s",
                     .logy = true,
                     .kind = "roofline",
                     .roofs = "roofs",
                     .reference = "article_table",
                     .reference_roof = a100.name});
    // The chapter's claims, each decided on this run's numbers.
    const auto article_intensity = [&](long row) { return article.number(row, "intensity [FLOP/B]"); };
    const double expected[] = {410, 680, 1, 32};  // the prefill/decode article's table
    bool as_article = true;
    std::string quoted;
    for (long r = 0; r < 4; ++r) {
      as_article = as_article && std::abs(article_intensity(r) / expected[r] - 1) < 0.05;
      quoted += (r ? ", " : "") + fixed(article_intensity(r), 1);
    }
    report.claim({.id = "03.article_intensities",
                  .source = "the prefill/decode article (arithmetic intensity table)",
                  .statement = "a 4096 projection in fp16 runs at ~410 and ~680 FLOP/byte in prefill (512, 1024 "
                               "tokens) and ~1 and ~32 in decode (batch 1, 32)",
                  .held = as_article,
                  .evidence = quoted + " FLOP/byte by gemm_work()",
                  .cause = as_article ? "" : "the byte model of perf/work.h counts the activations differently"});
    const bool a100_split = article_intensity(1) > a100.ridge() && article_intensity(0) > a100.ridge() &&
                            article_intensity(3) < a100.ridge();
    report.claim({.id = "03.a100_ridge",
                  .source = "the prefill/decode article (ridge point)",
                  .statement = "on an A100 (ridge ~153 FLOP/byte) prefill is compute-bound and decode, even at "
                               "batch 32, memory-bound",
                  .held = a100_split,
                  .evidence = "ridge " + fixed(a100.ridge(), 1) + "; prefill " + fixed(article_intensity(0), 0) +
                              " and " + fixed(article_intensity(1), 0) + ", decode batch 32 " +
                              fixed(article_intensity(3), 1) + " (" +
                              fixed(100 * article_intensity(3) / a100.ridge(), 0) + "% of the ridge)",
                  .cause = a100_split ? "" : "the datasheet entry's ridge differs from the article's"});
    const auto use = [&](long row, const std::string& gpu_name) {
      return compute_use.number(row, gpu_name + " compute use [%]");
    };
    bool use_split = true;
    std::string use_evidence;
    for (const std::string g : {"A100 80GB SXM", "H100 SXM"}) {
      use_split = use_split && use(0, g) > 90 && use(1, g) > 90 && use(2, g) < 20 && use(3, g) < 20;
      use_evidence += (use_evidence.empty() ? "" : "; ") + g + ": prefill " + fixed(use(0, g), 0) + "%, decode " +
                      fixed(use(2, g), 1) + "% (batch 1) and " + fixed(use(3, g), 1) + "% (batch 32)";
    }
    report.claim({.id = "03.compute_use",
                  .source = "the prefill/decode article (SM utilisation)",
                  .statement = "compute use is above 90% in prefill and below 20% in decode",
                  .held = use_split,
                  .evidence = use_evidence + " (simulated, roofline, llama-3-8b)",
                  .cause = use_split ? "" : "at these shapes the roofline's decode intensity passes 20% of the ridge"});
    const auto bytes_row = [&](long long batch, long long tokens) {
      for (long r = 0; r < static_cast<long>(decode_bytes.rows.size()); ++r)
        if (decode_bytes.number(r, "batch") == batch && decode_bytes.number(r, "context [tok]") == tokens) return r;
      fail("lab 03: no decode_bytes row for batch ", batch, ", context ", tokens);
    };
    const long small_step = bytes_row(1, 512), large_step = bytes_row(64, 32768);
    const auto share = [&](long row) { return decode_bytes.number(row, "KV share [%]"); };
    const bool both_reasons = share(small_step) < 50 && share(large_step) > 50;
    report.claim({.id = "03.decode_reads",
                  .source = "the KV cache article, §3-1 (KV reads); the prefill/decode article (weight reads)",
                  .statement = "decode is memory-bound because of weight reads at small batch and context, and "
                               "because of KV reads once batch × context is large",
                  .held = both_reasons,
                  .evidence = "KV is " + fixed(share(small_step), 1) + "% of the bytes at batch 1, context 512 and " +
                              fixed(share(large_step), 1) + "% at batch 64, context 32,768 (llama-3-8b, bf16)",
                  .cause = both_reasons ? "" : "the preset's weight or KV size differs from the published model's"});
    report.claim({.id = "03.counted_equals_formula",
                  .source = "this lab",
                  .statement = "the engine's counted FLOPs and bytes equal the closed form",
                  .held = mismatch.empty(),
                  .evidence = "all " + std::to_string(calibration.size()) + " measured steps compared",
                  .cause = mismatch.empty() ? "" : "counter.h and work.h disagree at " + mismatch});
    const auto intensity_of = [&](long row) { return points.number(row, "intensity [FLOP/B]"); };
    const long longest_prefill = static_cast<long>(prefill_lens.size()) - 1, decode_1 = longest_prefill + 1;
    const double prefill_i = intensity_of(longest_prefill), decode_i = intensity_of(decode_1);
    const bool split_here = prefill_i > ridge_here && decode_i < ridge_here;
    std::string why_not;
    if (prefill_i <= ridge_here)
      why_not = names[longest_prefill] + " reuses each weight byte too few times (" + fixed(prefill_i, 1) +
                " FLOP/byte) to pass this machine's ridge; a longer prompt (--prefill-lens) would";
    else if (decode_i >= ridge_here)
      why_not = "this machine's ridge (" + fixed(ridge_here, 1) + ") is below even a batch-" +
                std::to_string(decode_batches.front()) + " decode step's intensity";
    report.claim({.id = "03.bound_here",
                  .source = "the KV cache article, §3-1; the prefill/decode article",
                  .statement = "on this machine's measured roofs prefill is above the ridge point and decode below",
                  .held = split_here,
                  .evidence = "ridge " + fixed(ridge_here, 1) + " FLOP/byte (f32 FMA " + fixed(fmaN, 0) +
                              " GFLOP/s, read " + fixed(readN, 1) + " GB/s); " + names[longest_prefill] + " at " +
                              fixed(prefill_i, 1) + ", " + names[decode_1] + " at " + fixed(decode_i, 2),
                  .cause = why_not + (why_not.empty() || busy.empty() ? "" : "; and " + busy)});
    report.verdict("prefill runs at " + fixed(prefill_i, 0) + " FLOP/byte (" +
                   bound_name(bound_of(prefill_i, ridge_here)) + "-bound against this machine's ridge of " +
                   fixed(ridge_here, 1) + "), decode at batch " + std::to_string(decode_batches.front()) + " at " +
                   fixed(decode_i, 1) + " (" + bound_name(bound_of(decode_i, ridge_here)) + "-bound), rising to " +
                   fixed(intensity_of(-1), 1) + " at batch " + std::to_string(decode_batches.back()) + ".");
    report.save();
  });
}
