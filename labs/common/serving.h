// SPDX-License-Identifier: MIT
/**
 * @file serving.h
 * @brief What the serving labs (04-07) do around the engine, written once:
 *        serve a workload through the replay driver and keep what the
 *        tables read (steps, requests, tokens); build lab N-1's and lab N's
 *        rungs and record them; measure this machine's roofs and print a
 *        fitted cost model; set up one simulated GPU instance.
 *
 * A lab's main.cpp keeps what is its own (the tables and their verdict);
 * these are the steps two or more labs share, so they cannot drift apart.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "lab.h"
#include "perf/cost_model.h"
#include "perf/hardware.h"
#include "trace.h"
#include "serve/engine.h"
#include "serve/ladder.h"
#include "serve/replay.h"
#include "workload/workload.h"

namespace servelab::lab {

/// Called after every step of serve_workload() (replay.h's ReplayOptions::on_step).
using StepCallback = std::function<void(Engine& engine, const StepStats& step, std::span<const RequestOutput> outputs)>;

/// One serving run as the labs tabulate it.
struct ServedRun {
  std::vector<StepStats> steps{};                   ///< [steps run] every step, in order, empty ones included
  std::vector<const Request*> requests{};           ///< engine.requests(): owned by the engine, valid while it lives
  std::vector<std::vector<std::int32_t>> tokens{};  ///< [request] output token ids, in request id order

  /// Every request's output ids, concatenated in request id order.
  std::vector<std::int32_t> all_tokens() const;
  /// token_hash() of all_tokens(): equal for runs that must agree (core/hash.h).
  std::string tokens_hash() const;
};

/**
 * @brief Serves @p workload on @p engine with replay() (each request joins at its
 *        arrival) until the engine has nothing unfinished, keeping every step.
 * @param on_step called after each step, as ReplayOptions::on_step; it may add requests.
 * @return the steps, and the engine's requests (those added before the call and by
 *         @p on_step included) with their output tokens.
 * @throws Error as replay() does (a step that schedules nothing with nothing left to add).
 */
ServedRun serve_workload(Engine& engine, const std::vector<WorkloadRequest>& workload,
                         const StepCallback& on_step = {});

/// [request] output token ids of @p requests, in their order.
std::vector<std::vector<std::int32_t>> output_tokens(const std::vector<const Request*>& requests);

/// One measured step as CostModel::calibrate() fits it: its work and seconds (forward pass + scheduling).
std::pair<Work, double> timed_work(const StepStats& step);

/// Lab N-1's rung and lab N's over one base (serve/ladder.h), the pair a lab compares.
struct Rungs {
  LabConfig previous{};  ///< configure(Techniques::for_lab(N - 1), base)
  LabConfig current{};   ///< configure(Techniques::for_lab(N), base)
};

/**
 * @brief Builds lab @p lab's rung and the one below it over @p base and records
 *        both in @p report (record_configuration()): @p previous_run for lab
 *        N-1's, @p current_run for lab N's, in that order.
 * @param lab 2..7: the lab whose switch the comparison is about.
 */
Rungs compare_rungs(Report& report, int lab, const LabConfig& base, const std::string& previous_run,
                    const std::string& current_run);

/// This machine's two roofs, each measured several times (the best is the roof).
struct MeasuredRoofs {
  RoofSamples flops{"f32 FMA", {}};  ///< GFLOP/s of the engine's f32 FMA loop (lab 03), one sample per repeat
  RoofSamples read{"read", {}};      ///< GB/s of a streaming read, one sample per repeat

  /// The best FLOP rate measured, FLOP/s.
  double peak_flops() const;
  /// The best read bandwidth measured, bytes/s.
  double bandwidth() const;
};

/// Measures the f32 FMA and read roofs on @p pool's threads, @p repeats times each (perf/machine.h).
MeasuredRoofs measure_roofs(ThreadPool& pool, int repeats = 3);

/**
 * @brief A fitted cost model as the labs' notes print it, two decimals:
 *        "max(FLOPs / (P GFLOP/s x c), bytes / (B GB/s x m)) + O ms".
 * @param peak_flops   the roof it was fitted against, FLOP/s.
 * @param bandwidth    the roof it was fitted against, bytes/s.
 * @param units        false drops " GFLOP/s" and " GB/s" (a second formula in the same note).
 */
std::string fitted_formula(const CostModel& model, double peak_flops, double bandwidth, bool units = true);

/// One simulated GPU instance: a preset's shape on a datasheet's roofline, in bf16.
struct SimulatedGpu {
  SimulatedModel model;                ///< the preset, CostModel::for_hardware(), bf16 weights, activations and KV
  const Hardware* hardware = nullptr;  ///< the datasheet entry (perf/hardware.h), static storage
  std::size_t kv_cache_memory = 0;     ///< bytes left for KV: 90% of the GPU's memory less the bf16 weights
};

/**
 * @brief The simulated instance of @p model_preset on one @p gpu_name.
 * @param overhead_ms fixed cost per step, milliseconds.
 * @param model_flag  the flag that named @p model_preset, for the error.
 * @throws Error when the name is unknown, or naming @p model_flag when the weights leave no room for KV.
 */
SimulatedGpu simulated_gpu(const std::string& model_preset, const std::string& gpu_name, double overhead_ms,
                           const std::string& model_flag);

}  // namespace servelab::lab
