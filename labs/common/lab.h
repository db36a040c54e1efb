// SPDX-License-Identifier: MIT
/**
 * @file lab.h
 * @brief The harness every lab's main() uses: common flags, model loading,
 *        repeated timing with warm-up, a progress bar, and error handling.
 *
 * A lab is a short main(): parse flags, load the model, run the engine in
 * lab N-1's and lab N's configuration (serve/ladder.h), check the outputs
 * agree, print and save the tables (report.h).
 */
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/hash.h"
#include "core/timer.h"
#include "cli/model_flags.h"
#include "model/model.h"
#include "report.h"
#include "core/stats.h"
#include "serve/ladder.h"
#include "tokenizer/tokenizer.h"

namespace servelab::lab {

// A using-directive is transitive: a lab's main that says `using namespace servelab::labNN;` (whose
// header says `using namespace servelab::lab;`) sees the engine's names, the labs' common ones and its own.
using namespace servelab;

/// Flags shared by every lab: the model flags every command takes (cli/model_flags.h; a lab seeds
/// the weights with --seed and picks the reductions per table, so it takes neither --weights-seed
/// nor --deterministic), and the lab's own.
struct LabOptions : cli::ModelFlags {
  std::uint64_t seed = 0;       ///< seeds synthetic weights and stand-in prompts
  std::string out = "results";  ///< results root folder
  bool quick = false;           ///< smaller sizes and one repeat: a smoke run in seconds
  int repeats = 3;              ///< timed runs per point (the median is reported)
  int warmup = 1;               ///< untimed runs before timing
};

/// Registers the common flags on @p app, with @p default_preset as --preset's default.
void add_common_options(CLI::App& app, LabOptions& options, const std::string& default_preset);
/// add_common_options() and --trace FILE (trace.h): the flags of a lab that serves a workload through the
/// engine loop, every run of which --trace records as a Chrome trace.
void add_serving_options(CLI::App& app, LabOptions& options, const std::string& default_preset);

/**
 * @brief The model options the common flags ask for (--backend, --threads,
 *        --dtype, --attention), with @p deterministic reductions: the model
 *        half of a lab's base configuration (configure(), serve/ladder.h).
 * @throws Error naming the flag when --dtype, --threads, --repeats or --warmup is out of range.
 */
ModelOptions model_options(const LabOptions& options, bool deterministic);

/**
 * @brief Loads the model the flags ask for (--preset or --model), run with @p model.
 * @throws Error when the model cannot be loaded.
 */
std::unique_ptr<Model> load_model(const LabOptions& options, const ModelOptions& model);
/// load_model(options, model_options(options, deterministic)).
std::unique_ptr<Model> load_model(const LabOptions& options, bool deterministic);

/**
 * @brief Sets @p model up for a run of @p config: its attention kernels
 *        (the one model switch a lab flips, lab 05), after checking that every
 *        other model option is the one the model was loaded with.
 * @throws Error naming the option that differs (the model must be reloaded for it).
 */
void use_config(Model& model, const LabConfig& config);

/**
 * @brief Records in the results JSON (key "configurations", not printed) that
 *        run @p run used lab @p lab's rung of the ladder: @p ran, built by
 *        configure() over @p base. tests/labs compare it with configure().
 */
void record_configuration(Report& report, const std::string& run, int lab, const LabConfig& base, const LabConfig& ran);

/// The KV cache article's prompt (§2-5), newlines included, as its experiment tokenized it.
inline constexpr const char* kArticlePrompt =
    "\nExplain why GPUs are particularly suitable for Transformer-based\nlarge language model inference. Focus on "
    "matrix multiplication,\nparallelism, and memory usage.\n";

/// A lab's prompt: its ids, and the tokenizer that made them when the model has one.
struct LabPrompt {
  std::vector<std::int32_t> ids;       ///< prompt token ids
  std::optional<Tokenizer> tokenizer;  ///< set when --model has a tokenizer.json
  std::string description;             ///< one line for the settings block
};

/**
 * @brief The article's prompt encoded with the model's tokenizer.json when
 *        --model has one; otherwise @p stand_in_len seeded stand-in ids
 *        (synthetic presets have no tokenizer).
 * @throws Error when the tokenizer produces an id outside the model's vocabulary.
 */
LabPrompt article_prompt(const LabOptions& options, const ModelConfig& config, int stand_in_len);

/// Adds the model/machine/option lines every lab's settings block starts with.
void describe_run(Report& report, const Model& model, const LabOptions& options);

/// @p bytes in binary units with three significant digits, e.g. "268.0 MiB".
std::string human_bytes(double bytes);

/// @p value as a stream prints it by default (six significant digits, no trailing zeros), e.g. "1.5", "20".
std::string plain_number(double value);

/// @p value with @p digits digits after the point, e.g. fixed(2.345, 1) = "2.3": the numbers claims quote.
std::string fixed(double value, int digits);

/**
 * @brief How a series of step times grows from its start to its end, and how
 *        much one step's time wanders: what a claim "step time grows (or stays
 *        flat) with the context" is decided on.
 */
struct StepGrowth {
  double first = 0;  ///< median of the first third of the series (at least one step; the input's unit)
  double last = 0;   ///< median of the last third (at least one step)
  /// Median of |t[i+1] - t[i]| / t[i] over neighbouring steps, which differ by one token of context:
  /// the run's timing noise, against which a growth is read.
  double noise = 0;
  /// last / first: above 1 the series grew.
  double ratio() const { return last / first; }
};

/// step_growth() of @p times (one per step, in order); @throws Error when there are fewer than 2 or one is not positive.
StepGrowth step_growth(const std::vector<double>& times);

/// One roof measured several times (the best of them is the roof a lab uses).
struct RoofSamples {
  std::string name;             ///< what was measured, e.g. "f32 FMA, 2 threads"
  std::vector<double> samples;  ///< each repeat, in GFLOP/s or GB/s (all positive)
};

/**
 * @brief Spread of a lab's repeated roofs above which it says the machine was
 *        busy. On a quiet machine repeats of a roof agree within a few percent;
 *        under load they disagree by 20% and more, and so do the step times
 *        measured between them.
 */
inline constexpr double kBusySpread = 0.15;

/**
 * @brief The warning a lab prints when its own repeated roofs disagree by
 *        more than kBusySpread (relative_spread()): the machine was busy while
 *        it measured, so a cost model fitted against those roofs, and its
 *        error column, are not to be trusted.
 * @return "" when every roof is steady; else one line naming each unsteady
 *         roof with its spread, and what to do (rerun on a quiet machine).
 * @throws Error when a roof has no sample or a sample that is not positive.
 */
std::string busy_machine_warning(const std::vector<RoofSamples>& roofs);

/// Progress on stderr: a bar redrawn in place on a terminal, else one line per tenth of the work (with elapsed seconds).
class Progress {
 public:
  /// Starts a bar labelled @p label for @p total units of work.
  Progress(std::string label, long total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  /// Advances by @p units.
  void advance(long units = 1);

 private:
  void draw();
  std::string label_;
  long total_, done_ = 0;
  bool terminal_;         // a bar redrawn in place; otherwise a line per tenth
  long last_tenth_ = -1;  // the tenth last printed as a line
  double start_;          // seconds, for the lines' elapsed time
};

/**
 * @brief --quick's timing: one warm-up and one timed run, except that an
 *        explicit --repeats or --warmup wins (the user asked for it).
 */
void quick_timing(const CLI::App& app, LabOptions& options);

/**
 * @brief Parses the flags and runs @p body; turns every servelab::Error into
 *        one "<lab>: error: ..." line on stderr and exit status 1. A flag
 *        error (unknown flag, a value that is not a number) ends the same
 *        way; only --help exits 0. A run that ends well prints its wall time last
 *        ("<lab>: wall time 23.4 s"), the time per lab the learner's guide quotes.
 */
int run_lab(CLI::App& app, int argc, char** argv, const std::function<void()>& body);

}  // namespace servelab::lab
