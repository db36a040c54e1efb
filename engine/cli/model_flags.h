// SPDX-License-Identifier: MIT
/**
 * @file model_flags.h
 * @brief The model flags, declared once: which model (--preset or --model,
 *        --weights-seed) and how it runs (--backend, --dtype, --attention,
 *        --threads, --deterministic). Every lab, every `servelab` command that
 *        loads a model, and lab 07's workers take them with the same names,
 *        defaults, help and checks.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/model.h"

namespace CLI {
class App;
}  // namespace CLI

namespace servelab::cli {

/// The flags' values, as typed; model_options() checks and parses them.
struct ModelFlags {
  std::string preset = "tiny";        ///< --preset: a named shape with synthetic weights
  std::string model_dir{};            ///< --model: a Hugging Face model folder or a .gguf file instead
  std::uint64_t weights_seed = 0;     ///< --weights-seed: seed of synthetic weights
  std::string backend = "cpu";        ///< --backend: cpu or cuda
  std::string dtype = "f32";          ///< --dtype: f32, bf16, q8_0, q4_0, q4_1 or gguf; -math for their own arithmetic
  std::string attention = "blocked";  ///< --attention: naive, blocked or flash
  int threads = 0;                    ///< --threads: CPU threads, 0 = all cores
  bool no_huge_pages = false;         ///< --no-huge-pages: weights stay where the load put them
  bool deterministic = false;         ///< --deterministic: batch-invariant reductions
};

/// Which of the optional flags a command takes (the labs seed weights with their own --seed and
/// choose the reductions per table).
struct ModelFlagSet {
  bool weights_seed = true;   ///< --weights-seed
  bool deterministic = true;  ///< --deterministic
};

/**
 * @brief Registers the model flags on @p app, writing into @p flags (which must outlive the parse);
 *        --preset shows flags.preset as its default, and --model excludes it.
 */
void add_model_flags(CLI::App& app, ModelFlags& flags, ModelFlagSet which = {});

/**
 * @brief The model options the flags describe, parsed and checked.
 * @throws Error naming the flag when a value is unknown or --threads is outside [0, kMaxThreads].
 */
ModelOptions model_options(const ModelFlags& flags);

/**
 * @brief Loads the model the flags name (--preset with --weights-seed, or --model), run with
 *        @p options, after one "loading ..." line on stderr.
 * @throws Error when the model cannot be loaded.
 */
std::unique_ptr<Model> load_model(const ModelFlags& flags, const ModelOptions& options);
/// load_model(flags, model_options(flags)). @throws Error naming the flag when a value is out of range.
std::unique_ptr<Model> load_model(const ModelFlags& flags);

}  // namespace servelab::cli
