// SPDX-License-Identifier: MIT
/**
 * @file lab03.h
 * @brief Lab 03's computed tables (computed.cpp): the work of a step from
 *        its shape, and step times predicted by the cost model fitted here
 *        and from datasheet roofs. main.cpp measures this machine's roofs and
 *        steps and fits the cost model.
 * @see labs/03_roofline/README.md
 */
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lab.h"
#include "model/model.h"
#include "perf/cost_model.h"
#include "perf/hardware.h"
#include "perf/machine.h"
#include "perf/work.h"

namespace servelab::lab03 {

using namespace servelab::lab;

inline constexpr StepDtypes kGpuDtypes{DType::BF16, DType::BF16, DType::BF16};  // what a GPU server would run

using lab::fixed;

/// 1. The prefill/decode article's table: one hidden-4096 projection in fp16, against the A100's ridge: prefill is
///    compute-bound, decode memory-bound, by the intensity alone.
Table article_table(const Hardware& a100);

/// 2. Whole model steps of the published shapes, as a GPU server would run them (bf16): attention and the LM head
///    move the intensity off the one-GEMM numbers.
std::vector<Table> preset_step_tables(const Hardware& a100);

/// 2b. Compute use (tensor-core busy share) of prefill and decode steps of llama-3-8b on the A100 and H100, from the
///     roofline cost model: the prefill/decode article's SM utilisation, > 90% in prefill and < 20% in decode.
Table compute_use_table();

/// 2c. Weight bytes against KV bytes of llama-3-8b decode steps as batch and context grow: the KV cache article's
///     reason decode is memory-bound (KV reads) and the prefill/decode article's (weight reads), each where it holds.
Table decode_bytes_table();

/// 5. The cost model, calibrated here, predicted vs measured: what two straight roofs and a constant explain.
///    @p calibration and @p names are the measured steps; @p busy, if not empty, is printed as a warning.
Table cost_model_table(const CostModel& here, double fmaN, double readN,
                       const std::vector<std::pair<Work, double>>& calibration, const std::vector<std::string>& names,
                       const std::string& busy);

/// 6. GPU step times from the same model with datasheet roofs: simulated, what the same steps cost on a GPU.
Table gpu_simulated_table(const ModelConfig& c, int context);

/// 7. The article's puzzle: why a GPU barely noticed the recomputation (lab 02's experiment, predicted).
Table kv_cache_puzzle(const CostModel& here, const StepDtypes& engine_dtypes);

/// This machine's roofs, each measured three times (the best is the roof), GFLOP/s and GB/s.
struct MachineRoofs {
  std::vector<lab::RoofSamples> repeats{};  ///< f32 FMA, read and triad, on 1 thread and on all
  double bf16N = 0;                         ///< bf16 dot on all threads; 0 without AVX512_BF16
  double fma1 = 0, fmaN = 0, read1 = 0, readN = 0, triad1 = 0, triadN = 0;
};

/// Measures @p threads-thread and one-thread roofs three times each (measured.cpp).
MachineRoofs measure_machine(int threads);

/// 3. This machine's roofs, measured now, beside the datasheets: the roofs every point below is placed under.
Table roofs_table(const MachineRoofs& r, int threads);

/// Table 4 and what the cost model is fitted on.
struct MeasuredSteps {
  Table points{};                                      ///< one row per measured step
  std::vector<std::pair<Work, double>> calibration{};  ///< counted work and median seconds per step
  std::vector<std::string> names{};                    ///< each step's name, in calibration's order
  std::string mismatch{};  ///< the first step whose counted work differs from the closed form, or empty
};

/// 4. Real steps of @p model on this machine (measured.cpp): a prefill of each of @p prefill_lens tokens and a
///    decode step of each of @p decode_batches sequences with @p context tokens cached; the work counted by the
///    engine and compared with step_work(), timed o.warmup + o.repeats times, bound against @p ridge_here.
MeasuredSteps measure_steps(Model& model, const lab::LabOptions& o, const std::vector<int>& prefill_lens,
                            const std::vector<int>& decode_batches, int context, double ridge_here);

/// 8. The quantization lesson (quantized.cpp): the table, and what its claims are decided on.
struct QuantizationLesson {
  Table table{};                  ///< one row per weight format: f32, bf16, Q8_0, Q4_1
  double decode_speedup = 0;      ///< f32's decode step time / Q4_1's
  double prefill_speedup = 0;     ///< f32's prefill time / Q4_1's
  double bytes_ratio = 0;         ///< f32's bytes per decode step / Q4_1's
  std::vector<double> agreement;  ///< top-1 = f32 [%] per row
  int positions = 0;              ///< teacher-forced positions scored
  bool real_text = false;         ///< the model has a tokenizer: real text, and a perplexity
};

/// 8. The lab's model (the checkpoint or preset of @p o, @p base's threads) in f32, bf16, Q8_0 and Q4_1 weights,
///    one after another: a decode step with @p context tokens cached and a prefill of @p prefill_len tokens, timed
///    and placed against @p read_roof (GB/s), and each format's top-1 agreement with f32 (and perplexity, with a
///    tokenizer) teacher-forced on a short text.
QuantizationLesson quantization_lesson(const lab::LabOptions& o, const ModelOptions& base, int context, int prefill_len,
                                       double read_roof);

/// The chapter's claims (claims.cpp), each decided on this run's tables and @p roofs (with the @p busy warning
/// when the roofs' repeats spread), then the verdict. @p prefill_lens and @p decode_batches are sorted.
void check_claims(lab::Report& report, const Table& article, const Hardware& a100, const Table& compute_use,
                  const Table& decode_bytes, const MeasuredSteps& steps, const MachineRoofs& roofs,
                  const std::vector<int>& prefill_lens, const std::vector<int>& decode_batches,
                  const QuantizationLesson& quantization, const std::string& busy);

}  // namespace servelab::lab03
