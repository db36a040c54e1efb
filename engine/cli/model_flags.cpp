// SPDX-License-Identifier: MIT
#include "cli/model_flags.h"

#include <iomanip>
#include <iostream>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"

namespace servelab::cli {

void add_model_flags(CLI::App& app, ModelFlags& f, ModelFlagSet which) {
  auto* preset =
      app.add_option("--preset", f.preset, "named model shape with synthetic weights")->capture_default_str();
  app.add_option("--model", f.model_dir,
                 "Hugging Face model folder (config.json, *.safetensors [, tokenizer.json]) or a .gguf file")
      ->excludes(preset);
  if (which.weights_seed)
    app.add_option("--weights-seed", f.weights_seed, "seed of synthetic weights")->capture_default_str();
  app.add_option("--backend", f.backend, "cpu or cuda")->capture_default_str();
  app.add_option("--dtype", f.dtype,
                 "f32 (exact), bf16 (half the weight bytes), bf16-math (bf16 prefill arithmetic too), "
                 "q8_0/q4_0/q4_1 (llama.cpp's blocks, read quantized by decode) or gguf (a .gguf's own types); "
                 "with -math (q8_0-math, ..., gguf-math) quantized weights multiply in int8, as llama.cpp")
      ->capture_default_str();
  app.add_option("--attention", f.attention, "attention kernels: naive, blocked or flash (lab 05)")
      ->capture_default_str();
  app.add_option("--threads", f.threads, "CPU threads, 0 = all cores")->capture_default_str();
  app.add_flag("--no-huge-pages", f.no_huge_pages,
               "leave the weights in the file mappings and heap blocks the load made, in 4 KiB pages, instead of "
               "copying them into 2 MiB transparent huge pages");
  if (which.deterministic)
    app.add_flag("--deterministic", f.deterministic,
                 "batch-invariant reductions: a request's tokens do not depend on its batch");
}

ModelOptions model_options(const ModelFlags& f) {
  check(f.threads >= 0 && f.threads <= kMaxThreads, "--threads must be in [0, ", kMaxThreads, "] (0 = all cores), got ",
        f.threads);
  ModelOptions options;
  options.backend = parse_backend(f.backend, "--backend");
  options.num_threads = f.threads;
  options.deterministic = f.deterministic;
  options.huge_pages = !f.no_huge_pages;
  options.attention = parse_attention_kind(f.attention, "--attention");
  apply_dtype_flag(f.dtype, "--dtype", options);
  return options;
}

std::unique_ptr<Model> load_model(const ModelFlags& f, const ModelOptions& options) {
  std::cerr << "loading " << (f.model_dir.empty() ? "preset " + f.preset + " (synthetic weights)" : f.model_dir)
            << " ...\n";
  std::unique_ptr<Model> model = f.model_dir.empty() ? Model::from_preset(f.preset, f.weights_seed, options)
                                                     : Model::from_pretrained(f.model_dir, options);
  // Whether the kernel gave the weights huge pages is its choice (core/huge_pages.h): say what it chose.
  if (const Model::WeightPlacement w = model->weight_placement(); w.bytes > 0)
    std::cerr << "weights: " << std::fixed << std::setprecision(1) << static_cast<double>(w.bytes) / 1e6 << " MB, "
              << static_cast<double>(w.huge_page_bytes) / 1e6
              << " MB of them in 2 MiB pages (transparent huge pages; --no-huge-pages leaves them in place)\n"
              << std::defaultfloat;
  return model;
}

std::unique_ptr<Model> load_model(const ModelFlags& f) { return load_model(f, model_options(f)); }

}  // namespace servelab::cli
