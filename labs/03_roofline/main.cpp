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

using namespace servelab::lab03;

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
    const StepDtypes engine_dtypes{model->options().weight_dtype, DType::F32, DType::F32};
    const MeasuredSteps steps = measure_steps(*model, o, prefill_lens, decode_batches, context, fmaN / readN);
    report.add_table(steps.points);

    // 5. The cost model, calibrated here, predicted vs measured.
    const CostModel here = CostModel::calibrate("this CPU (calibrated)", fmaN * 1e9, readN * 1e9, steps.calibration);
    report.add_table(cost_model_table(here, fmaN, readN, steps.calibration, steps.names, busy));

    report.add_table(gpu_simulated_table(c, context));

    report.add_table(kv_cache_puzzle(here, engine_dtypes));

    // 8. The quantization lever: the same model in four weight formats, decode against prefill, and the rounding's cost.
    ModelOptions lesson_base = config.model;
    lesson_base.backend = Backend::CPU;  // the block formats run on the CPU kernels
    // A 128-token prefill is already compute-bound (about 60 FLOP/byte in f32) and costs a default run seconds, not
    // the minute four 512-token prefills of every format would.
    const QuantizationLesson quantization = quantization_lesson(o, lesson_base, context, 128, readN);
    report.add_table(quantization.table);

    report.add_plot(
        {.name = "roofline",
         .data = {.table = "measured_points", .x = "intensity [FLOP/B]", .y = {"achieved GFLOP/s"}},
         .labels = {"Lab 03: measured steps under the roofs", "arithmetic intensity [FLOP/byte]", "GFLOP/s"},
         .logy = true,
         .kind = "roofline",
         .roofs = "roofs",
         .reference = "article_table",
         .reference_roof = a100.name});
    check_claims(report, article, a100, compute_use, decode_bytes, steps, machine_roofs, prefill_lens, decode_batches,
                 quantization, busy);
    report.save();
  });
}
