// SPDX-License-Identifier: MIT
#include "lab.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "model/pretrained.h"
#include "trace.h"
#include "workload/synthetic_prompt.h"

namespace servelab::lab {

void add_common_options(CLI::App& app, LabOptions& o, const std::string& default_preset) {
  o.preset = default_preset;
  cli::add_model_flags(app, o, {.weights_seed = false, .deterministic = false});
  app.add_option("--seed", o.seed, "seed of synthetic weights and prompts")->capture_default_str();
  app.add_option("--out", o.out, "results folder")->capture_default_str();
  app.add_flag("--quick", o.quick, "small sizes and one repeat: a smoke run in seconds");
  app.add_option("--repeats", o.repeats, "timed runs per point (median reported)")->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed runs before timing")->capture_default_str();
}

void add_serving_options(CLI::App& app, LabOptions& o, const std::string& default_preset) {
  add_common_options(app, o, default_preset);
  add_trace_options(app);
}

ModelOptions model_options(const LabOptions& o, bool deterministic) {
  check(o.repeats >= 1, "--repeats must be >= 1, got ", o.repeats);
  check(o.warmup >= 0, "--warmup must be >= 0, got ", o.warmup);
  cli::ModelFlags flags = o;
  flags.deterministic = deterministic;
  return cli::model_options(flags);
}

std::unique_ptr<Model> load_model(const LabOptions& o, const ModelOptions& m) {
  cli::ModelFlags flags = o;
  flags.weights_seed = o.seed;  // a lab's --seed seeds the weights too
  return cli::load_model(flags, m);
}

std::unique_ptr<Model> load_model(const LabOptions& o, bool deterministic) {
  return load_model(o, model_options(o, deterministic));
}

void use_config(Model& model, const LabConfig& config) {
  const ModelOptions& loaded = model.options();
  const ModelOptions& want = config.model;
  const auto same = [](bool equal, const char* option) {
    check(equal, "lab configuration: the model was loaded with another ", option, " than the run's configuration");
  };
  same(loaded.backend == want.backend, "backend");
  same(loaded.num_threads == want.num_threads, "thread count");
  same(loaded.weight_dtype == want.weight_dtype, "weight dtype");
  same(loaded.deterministic == want.deterministic, "reduction mode (deterministic)");
  same(loaded.bf16_activations == want.bf16_activations && loaded.int8_activations == want.int8_activations,
       "activation dtype");
  model.set_attention(want.attention);
}

void record_configuration(Report& report, const std::string& run, int lab, const LabConfig& base,
                          const LabConfig& ran) {
  report.record("configurations", {{"run", run}, {"lab", lab}, {"base", to_json(base)}, {"ran", to_json(ran)}});
}

LabPrompt article_prompt(const LabOptions& o, const ModelConfig& config, int stand_in_len) {
  LabPrompt p;
  if (!o.model_dir.empty() && has_tokenizer(o.model_dir)) {
    p.tokenizer.emplace(load_tokenizer(o.model_dir));
    p.ids = p.tokenizer->encode(kArticlePrompt);
    for (std::int32_t id : p.ids)
      check(id >= 0 && id < config.vocab_size, p.tokenizer->source(), ": id ", id,
            " is outside the model's vocabulary [0, ", config.vocab_size, ")");
    p.description = "the article's prompt, " + std::to_string(p.ids.size()) + " tokens with " + p.tokenizer->source();
  } else {
    p.ids = synthetic_prompt(stand_in_len, config.vocab_size, o.seed);
    p.description = std::to_string(stand_in_len) + "-token stand-in prompt (no tokenizer.json: seeded ids)";
  }
  return p;
}

void describe_run(Report& report, const Model& model, const LabOptions& o) {
  const ModelConfig& c = model.config();
  std::ostringstream shape;
  shape << arch_name(c.arch) << ", " << std::fixed << std::setprecision(1) << c.num_parameters() / 1e6 << " M params, "
        << c.num_hidden_layers << " layers, hidden " << c.hidden_size << ", " << c.attention_kind() << " "
        << c.num_attention_heads << "/" << c.num_key_value_heads << " heads of " << c.head_dim << ", vocab "
        << c.vocab_size;
  report.setting("model",
                 c.name + (o.model_dir.empty() ? " (synthetic weights, seed " + std::to_string(o.seed) + ")" : ""));
  report.setting("shape", shape.str());
  const auto machine = Report::machine_metadata();
  report.setting("device", o.backend + ", " + machine["cpu"].get<std::string>() + ", " +
                               std::to_string(model.num_threads()) + " threads");
  report.setting("dtype",
                 model.options().bf16_activations && model.options().int8_activations
                     ? o.dtype +
                           " weights, bf16 arithmetic for bf16 tensors and int8 for quantized ones, f32 "
                           "activations between ops and KV cache"
                 : model.options().bf16_activations
                     ? "bf16 weights, bf16 arithmetic in prefill GEMMs, f32 activations between ops and KV cache"
                 : model.options().int8_activations
                     ? o.dtype + " weights, int8 arithmetic in the row kernels, f32 activations and KV cache"
                     : o.dtype + " weights, f32 activations and KV cache");
  report.setting("reductions",
                 model.options().deterministic ? "deterministic (batch-invariant)" : "fast (library GEMMs)");
  report.setting("attention", to_string(model.options().attention));
  report.setting("timing", std::to_string(o.warmup) + " warm-up + " + std::to_string(o.repeats) +
                               " timed runs per point, median shown (min/max in the files)");
}

Progress::Progress(std::string label, long total)
    : label_(std::move(label)),
      total_(std::max(1L, total)),
      terminal_(::isatty(STDERR_FILENO) != 0),
      start_(now_seconds()) {
  draw();
}

Progress::~Progress() {
  if (terminal_) std::cerr << "\r\033[K" << std::flush;
}

std::string busy_machine_warning(const std::vector<RoofSamples>& roofs) {
  std::ostringstream unsteady;
  double worst = 0;
  for (const RoofSamples& roof : roofs) {
    const double spread = relative_spread(roof.samples);
    worst = std::max(worst, spread);
    if (spread > kBusySpread)
      unsteady << (unsteady.tellp() > 0 ? ", " : "") << roof.name << " by " << std::fixed << std::setprecision(0)
               << 100 * spread << "%";
  }
  if (worst <= kBusySpread) return "";
  return "the machine was busy: repeats of its roofs disagree (" + unsteady.str() + "; steady is within " +
         std::to_string(static_cast<int>(100 * kBusySpread)) +
         "%), so the step times vary too and the cost model's errors are not to be trusted; rerun on a quiet machine";
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) bytes /= 1024.0, ++u;
  std::ostringstream os;
  os << std::fixed << std::setprecision(bytes < 10 ? 2 : 1) << bytes << ' ' << units[u];
  return os.str();
}

std::string plain_number(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

std::string fixed(double value, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << value;
  return os.str();
}

StepGrowth step_growth(const std::vector<double>& times) {
  check(times.size() >= 2, "step_growth: needs 2 or more step times, got ", times.size());
  for (double t : times) check(t > 0, "step_growth: a step time is not positive: ", t);
  const std::size_t third = std::max<std::size_t>(1, times.size() / 3);
  std::vector<double> gaps;
  for (std::size_t i = 0; i + 1 < times.size(); ++i) gaps.push_back(std::abs(times[i + 1] - times[i]) / times[i]);
  return {.first = summarize({times.begin(), times.begin() + static_cast<long>(third)}).median,
          .last = summarize({times.end() - static_cast<long>(third), times.end()}).median,
          .noise = summarize(gaps).median};
}

void Progress::advance(long units) {
  done_ = std::min(total_, done_ + units);
  draw();
}

void Progress::draw() {
  const long percent = 100 * done_ / total_;
  if (terminal_) {
    const int width = 30, filled = static_cast<int>(width * done_ / total_);
    std::cerr << "\r" << label_ << " [" << std::string(filled, '#') << std::string(width - filled, '.') << "] "
              << percent << "%" << std::flush;
    return;
  }
  // Piped or logged: a line per tenth, so a long run is never silent for minutes.
  if (percent / 10 == last_tenth_) return;
  last_tenth_ = percent / 10;
  std::cerr << label_ << ": " << percent << "% after " << static_cast<long>(now_seconds() - start_) << " s\n"
            << std::flush;
}

void quick_timing(const CLI::App& app, LabOptions& o) {
  if (app.get_option("--repeats")->count() == 0) o.repeats = 1;
  if (app.get_option("--warmup")->count() == 0)
    o.warmup = 1;  // a cold first point would make the plot fall as the work grows
}

int run_lab(CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  // Flag errors look like every other error: "<lab>: error: ...", exit 1 (CLI11's own codes are 100+).
  app.failure_message(
      [name = app.get_name()](const CLI::App*, const CLI::Error& e) { return name + ": error: " + e.what() + "\n"; });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  const double start = now_seconds();
  try {
    body();
    // The learner's guide (docs/student.md) gives each lab's time from this line; it is the whole run, flags to save.
    // On stderr, beside the progress bars: stdout stays the tables (and answer_key's JSON).
    std::cerr << app.get_name() << ": wall time " << std::fixed << std::setprecision(1) << now_seconds() - start
              << " s\n";
  } catch (const Error& e) {
    std::cout.flush();
    std::cerr << app.get_name() << ": error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << app.get_name() << ": error: out of memory (try --quick or a smaller --preset)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << app.get_name() << ": error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace servelab::lab
