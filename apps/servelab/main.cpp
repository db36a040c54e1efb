/**
 * @file main.cpp
 * @brief `servelab`: the engine's command-line front end.
 *
 *   servelab generate [--preset NAME | --model DIR] [--prompt-ids 1,2,3 | --prompt-len N] ...
 *   servelab presets
 *
 * Results go to stdout, diagnostics to stderr; any bad input prints one
 * `servelab: error: ...` line and exits with status 1 before any output.
 */
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/timer.h"
#include "model/model.h"
#include "serve/generate.h"

namespace {

using namespace servelab;

struct GenerateArgs {
  std::string preset = "qwen2.5-0.5b";
  std::string model_dir;
  std::string prompt_ids;
  int prompt_len = 32;
  int max_new_tokens = 32;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  std::uint64_t seed = 0;
  std::uint64_t weights_seed = 0;
  int threads = 0;
  bool no_kv_cache = false;
  bool deterministic = false;
  std::string backend = "cpu";
};

std::vector<std::int32_t> parse_ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    long value = 0;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check(used == item.size() && !item.empty(), "--prompt-ids: '", item,
          "' is not an integer (expected comma-separated token ids, e.g. 1,2,3)");
    ids.push_back(static_cast<std::int32_t>(value));
  }
  check(!ids.empty(), "--prompt-ids is empty (expected comma-separated token ids)");
  return ids;
}

// A deterministic stand-in prompt for synthetic models, which have no tokenizer.
std::vector<std::int32_t> synthetic_prompt(int length, int vocab, std::uint64_t seed) {
  check(length >= 1, "--prompt-len must be >= 1, got ", length);
  std::vector<std::int32_t> ids(length);
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(vocab));
  }
  return ids;
}

// FNV-1a of the ids, printed so runs that must agree visibly print the same hash.
std::string token_hash(const std::vector<std::int32_t>& ids) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::int32_t id : ids)
    for (int b = 0; b < 4; ++b) h = (h ^ ((static_cast<std::uint32_t>(id) >> (8 * b)) & 0xff)) * 0x100000001b3ull;
  std::ostringstream os;
  os << std::hex << std::setw(16) << std::setfill('0') << h;
  return os.str().substr(0, 8);
}

int run_generate(const GenerateArgs& a) {
  EngineOptions options;
  options.backend = parse_backend(a.backend, "--backend");
  options.num_threads = a.threads;
  options.deterministic = a.deterministic;
  check(a.threads >= 0, "--threads must be >= 0 (0 = all cores), got ", a.threads);

  const double load_start = now_seconds();
  std::cerr << "loading " << (a.model_dir.empty() ? "preset " + a.preset + " (synthetic weights)" : a.model_dir)
            << " ...\n";
  std::unique_ptr<Model> model = a.model_dir.empty() ? Model::from_preset(a.preset, a.weights_seed, options)
                                                     : Model::from_pretrained(a.model_dir, options);
  const double load_seconds = now_seconds() - load_start;
  const ModelConfig& c = model->config();

  const std::vector<std::int32_t> prompt =
      a.prompt_ids.empty() ? synthetic_prompt(a.prompt_len, c.vocab_size, a.seed) : parse_ids(a.prompt_ids);
  GenerateOptions gen;
  gen.max_new_tokens = a.max_new_tokens;
  gen.use_kv_cache = !a.no_kv_cache;
  gen.sampling = {a.temperature, a.top_k, a.top_p, a.seed};
  gen.sampling.validate();

  const GenerateResult r = generate(*model, prompt, gen);

  std::cout << "## servelab generate\n\n"
            << "model      " << c.name << " (" << arch_name(c.arch) << ", " << std::fixed << std::setprecision(1)
            << c.num_parameters() / 1e6 << " M params, " << c.num_hidden_layers << " layers, hidden " << c.hidden_size << ", "
            << c.attention_kind() << " " << c.num_attention_heads << "/" << c.num_key_value_heads << " heads)\n"
            << "weights    " << (a.model_dir.empty() ? "synthetic, seed " + std::to_string(a.weights_seed) : a.model_dir)
            << ", computed in f32 on cpu, " << model->num_threads() << " threads\n"
            << "kv cache   " << (gen.use_kv_cache ? "on (contiguous)" : "off (recompute every step)")
            << ", reductions " << (a.deterministic ? "deterministic" : "fast (OpenBLAS)") << "\n"
            << "sampling   " << (a.temperature == 0.0f ? std::string("greedy") : "temperature " + std::to_string(a.temperature))
            << ", seed " << a.seed << "\n"
            << "load       " << std::fixed << std::setprecision(2) << load_seconds << " s\n\n";
  if (a.model_dir.empty())
    std::cout << "(synthetic weights and no tokenizer: the token ids below mean nothing as text)\n\n";
  std::cout << "prompt ids   ";
  for (auto id : prompt) std::cout << id << ' ';
  std::cout << "\noutput ids   ";
  for (auto id : r.output_ids) std::cout << id << ' ';
  std::cout << "\n\n"
            << "| phase   | tokens | time (ms) | tokens/s |\n"
            << "|---------|-------:|----------:|---------:|\n"
            << std::setprecision(1) << "| prefill | " << std::setw(6) << r.prompt_tokens << " | " << std::setw(9)
            << r.ttft() * 1e3 << " | " << std::setw(8) << r.prefill_tokens_per_second() << " |\n"
            << "| decode  | " << std::setw(6) << r.output_ids.size() - 1 << " | " << std::setw(9)
            << r.tpot() * (r.output_ids.size() - 1) * 1e3 << " | " << std::setw(8) << r.decode_tokens_per_second()
            << " |\n\n"
            << std::setprecision(2) << "TTFT " << r.ttft() * 1e3 << " ms, TPOT " << r.tpot() * 1e3
            << " ms, output hash " << token_hash(r.output_ids) << "\n";
  return 0;
}

int run_presets() {
  std::cout << "| preset | arch | params (M) | layers | hidden | heads | kv heads | head_dim | vocab |\n"
            << "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& name : preset_names()) {
    const ModelConfig c = preset(name);
    std::cout << "| " << name << " | " << arch_name(c.arch) << " | " << std::fixed << std::setprecision(1)
              << c.num_parameters() / 1e6 << " | " << c.num_hidden_layers << " | " << c.hidden_size << " | "
              << c.num_attention_heads << " | " << c.num_key_value_heads << " | " << c.head_dim << " | "
              << c.vocab_size << " |\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"servelab: a teaching LLM serving engine"};
  app.require_subcommand(1);
  GenerateArgs g;
  auto* gen = app.add_subcommand("generate", "generate tokens after a prompt and print prefill/decode timings");
  auto* preset_opt = gen->add_option("--preset", g.preset, "named model shape with synthetic weights")
                         ->capture_default_str();
  gen->add_option("--model", g.model_dir, "Hugging Face model folder (config.json + *.safetensors)")
      ->excludes(preset_opt);
  auto* ids_opt = gen->add_option("--prompt-ids", g.prompt_ids, "prompt as comma-separated token ids");
  gen->add_option("--prompt-len", g.prompt_len, "length of a synthetic prompt when no ids are given")
      ->capture_default_str()
      ->excludes(ids_opt);
  gen->add_option("--max-new-tokens", g.max_new_tokens, "tokens to generate")->capture_default_str();
  gen->add_option("--temperature", g.temperature, "0 = greedy")->capture_default_str();
  gen->add_option("--top-k", g.top_k, "keep the k most likely tokens, 0 = all")->capture_default_str();
  gen->add_option("--top-p", g.top_p, "nucleus sampling mass")->capture_default_str();
  gen->add_option("--seed", g.seed, "sampling and synthetic-prompt seed")->capture_default_str();
  gen->add_option("--weights-seed", g.weights_seed, "seed of synthetic weights")->capture_default_str();
  gen->add_option("--threads", g.threads, "CPU threads, 0 = all cores")->capture_default_str();
  gen->add_flag("--no-kv-cache", g.no_kv_cache, "recompute the whole sequence every step (use_cache=False)");
  gen->add_flag("--deterministic", g.deterministic, "batch-invariant reductions (slower prefill)");
  gen->add_option("--backend", g.backend, "cpu or cuda")->capture_default_str();
  auto* presets = app.add_subcommand("presets", "list the named model shapes");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (gen->parsed()) return run_generate(g);
    if (presets->parsed()) return run_presets();
  } catch (const Error& e) {
    std::cout.flush();
    std::cerr << "servelab: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "servelab: error: out of memory (try a smaller --preset or --prompt-len)\n";
    return 1;
  }
  return 0;
}
