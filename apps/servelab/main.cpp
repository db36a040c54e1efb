/**
 * @file main.cpp
 * @brief `servelab`: the engine's command-line front end.
 *
 *   servelab generate [--preset NAME | --model DIR] [--prompt TEXT | --chat MESSAGE | --prompt-ids 1,2,3 | --prompt-len N] ...
 *   servelab tokenize (--model DIR | --tokenizer FILE) (--text TEXT | --file F)
 *   servelab presets
 *   servelab serve (--preset NAME | --model DIR) [--host H] [--port N] [engine flags]   (serve.cpp)
 *   servelab bench serve [--host H] [--port N] [--request-rate R] [--max-concurrency C] ...   (bench.cpp)
 *   servelab router [--control tcp://127.0.0.1:0] [--endpoint-file F]          (lab 07)
 *   servelab worker --role prefill|decode --router tcp://HOST:PORT ...          (lab 07)
 *
 * Results go to stdout, diagnostics to stderr; any bad input prints one
 * `servelab: error: ...` line and exits with status 1 before any output.
 * Generated text streams to stdout as tokens arrive, so everything that can
 * be wrong with a request is checked before the first token is printed.
 */
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <optional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "engine_flags.h"
#include "disagg_commands.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "model/model.h"
#include "serve/generate.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/pretrained.h"
#include "tokenizer/utf8.h"
#include "serve.h"
#include "workload/synthetic_prompt.h"

namespace {

using namespace servelab;

struct GenerateArgs {
  std::string preset = "qwen2.5-0.5b";
  std::string model_dir;
  std::string tokenizer_file;
  std::string prompt;
  std::string chat;
  std::string text_flag;  // "--prompt" or "--chat" when one was given (even as an empty string), else ""
  std::string system;
  std::string prompt_ids;
  bool given_model = false;       // --model was on the command line (an empty value is then an error)
  bool given_prompt_ids = false;  // --prompt-ids was on the command line
  bool given_tokenizer = false;   // --tokenizer was on the command line
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
  std::string attention = "blocked";
  std::string dtype = "f32";
  std::string backend = "cpu";
};

struct TokenizeArgs {
  std::string model_dir;
  std::string tokenizer_file;
  std::string text;
  std::string file;
  bool no_special_tokens = false;
};

std::vector<std::int32_t> parse_ids(const std::string& text) {
  check(!text.empty(), "--prompt-ids is empty (expected comma-separated token ids, e.g. 1,2,3)");
  std::vector<std::int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    // Checked: 4294967297 must be an error, not id 1. The vocabulary bound is checked by generate().
    check(!item.empty(), "--prompt-ids: empty entry in '", text, "' (expected comma-separated token ids, e.g. 1,2,3)");
    ids.push_back(parse_int<std::int32_t>(item, 0, std::numeric_limits<std::int32_t>::max(), "--prompt-ids"));
  }
  check(!text.ends_with(','), "--prompt-ids: trailing comma in '", text, "'");
  return ids;
}


// The tokenizer a command uses, and the folder its tokenizer_config.json,
// chat template and generation_config.json are read from.
struct TextSide {
  Tokenizer tokenizer;
  std::filesystem::path config_dir;
};

// --tokenizer FILE wins over the model folder's tokenizer.json; a preset has none.
TextSide load_text_side(const std::string& tokenizer_file, const std::string& model_dir, const std::string& why) {
  if (!tokenizer_file.empty())
    return {Tokenizer::from_file(tokenizer_file), std::filesystem::path(tokenizer_file).parent_path()};
  check(!model_dir.empty(), why,
        " needs a tokenizer, and a --preset has none: use --model DIR (with tokenizer.json) or --tokenizer FILE");
  return {load_tokenizer(model_dir), model_dir};
}

std::string read_text_file(const std::string& path) {
  // A folder opens as a stream on Linux and reads as nothing: refuse it by name.
  check(!std::filesystem::is_directory(path), path, ": is a directory (expected a UTF-8 text file)");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), path, ": cannot open (expected a UTF-8 text file)");
  std::ostringstream text;
  text << in.rdbuf();
  check(!in.bad(), path, ": cannot read");
  return text.str();
}

// The prompt and what the output means, decided before anything is printed.
struct Prompt {
  std::vector<std::int32_t> ids;
  std::optional<TextSide> text;        // set when the prompt is text: output is decoded and streamed
  std::string description;             // how the prompt was made, for the header
  std::vector<std::int32_t> stop_ids;  // end generation (text prompts only)
};

Prompt make_prompt(const GenerateArgs& a, const ModelConfig& c) {
  Prompt p;
  if (a.text_flag.empty()) {
    // Checked before the ids are allocated: 2^31 - 1 would ask for 8 GB first.
    if (!a.given_prompt_ids)
      check(a.prompt_len >= 1 && a.prompt_len <= c.max_position_embeddings, "--prompt-len must be in [1, ",
            c.max_position_embeddings, "] (max_position_embeddings of ", c.name, "), got ", a.prompt_len);
    p.ids = a.given_prompt_ids ? parse_ids(a.prompt_ids) : synthetic_prompt(a.prompt_len, c.vocab_size, a.seed);
    p.description = a.given_prompt_ids ? "--prompt-ids" : "seeded stand-in (--prompt-len)";
    return p;
  }
  const bool chat_mode = a.text_flag == "--chat";
  p.text = load_text_side(a.tokenizer_file, a.model_dir, a.text_flag);
  const Tokenizer& tok = p.text->tokenizer;
  // A tokenizer from another model would produce ids the embedding table does not have.
  check(tok.vocab_size() <= c.vocab_size, tok.source(), ": the tokenizer has ids up to ", tok.vocab_size() - 1,
        " but model ", c.name, " has vocab_size ", c.vocab_size, "; the tokenizer belongs to another model");
  if (!chat_mode) {
    check_utf8(a.prompt, "--prompt");
    p.ids = tok.encode(a.prompt, true);
    p.description = "--prompt text";
  } else {
    const ChatTemplate chat = load_chat_template(p.text->config_dir);
    std::vector<ChatMessage> messages;
    if (!a.system.empty()) messages.push_back({"system", a.system});
    messages.push_back({"user", a.chat});
    // As transformers' apply_chat_template: the template writes the special tokens itself.
    p.ids = tok.encode(chat.render(messages, true), false);
    p.description = std::string("--chat, ") + chat.name() + " template";
  }
  p.stop_ids = load_stop_token_ids(p.text->config_dir, tok);
  return p;
}

int run_generate(const GenerateArgs& a) {
  const ModelOptions options = cli::model_options(a.backend, a.threads, a.deterministic, a.attention, a.dtype);
  // An empty value is a mistake (an unset shell variable), not a request for the default.
  check(!a.given_model || !a.model_dir.empty(), "--model is empty (expected a Hugging Face model folder)");
  check(!a.given_tokenizer || !a.tokenizer_file.empty(), "--tokenizer is empty (expected a tokenizer.json file)");
  check(a.system.empty() || !a.chat.empty(), "--system needs --chat (it is the system message of the conversation)");
  check(a.tokenizer_file.empty() || !a.text_flag.empty(),
        "--tokenizer needs --prompt or --chat (a prompt given as ids is not tokenized)");

  const double load_start = now_seconds();
  std::cerr << "loading " << (a.model_dir.empty() ? "preset " + a.preset + " (synthetic weights)" : a.model_dir)
            << " ...\n";
  std::unique_ptr<Model> model = a.model_dir.empty() ? Model::from_preset(a.preset, a.weights_seed, options)
                                                     : Model::from_pretrained(a.model_dir, options);
  const ModelConfig& c = model->config();
  const Prompt prompt = make_prompt(a, c);
  const double load_seconds = now_seconds() - load_start;

  GenerateOptions gen;
  gen.max_new_tokens = a.max_new_tokens;
  gen.use_kv_cache = !a.no_kv_cache;
  gen.sampling = {a.temperature, a.top_k, a.top_p, a.seed};
  gen.stop_token_ids = prompt.stop_ids;
  gen.sampling.validate();

  std::ostringstream header;
  header << "## servelab generate\n\n"
         << "model      " << c.name << " (" << arch_name(c.arch) << ", " << std::fixed << std::setprecision(1)
         << c.num_parameters() / 1e6 << " M params, " << c.num_hidden_layers << " layers, hidden " << c.hidden_size
         << ", " << c.attention_kind() << " " << c.num_attention_heads << "/" << c.num_key_value_heads << " heads)\n"
         << "weights    " << (a.model_dir.empty() ? "synthetic, seed " + std::to_string(a.weights_seed) : a.model_dir)
         << ", " << dtype_name(options.weight_dtype) << " weights, "
         << (options.bf16_activations ? "bf16 prefill arithmetic" : "f32 activations") << ", cpu, " << model->num_threads()
         << " threads\n"
         << "kv cache   " << (gen.use_kv_cache ? "on (contiguous)" : "off (recompute every step)") << ", reductions "
         << (a.deterministic ? "deterministic" : "fast (library GEMMs)") << ", attention " << a.attention << "\n"
         << "sampling   " << (a.temperature == 0.0f ? std::string("greedy") : "temperature " + std::to_string(a.temperature))
         << ", seed " << a.seed << "\n";
  if (prompt.text) {
    header << "tokenizer  " << prompt.text->tokenizer.source() << " (" << prompt.text->tokenizer.vocab_size()
           << " ids), stop ids";
    for (auto id : prompt.stop_ids) header << ' ' << id;
    header << (prompt.stop_ids.empty() ? " none" : "") << "\n";
  }
  header << "prompt     " << prompt.ids.size() << " tokens from " << prompt.description << "\n"
         << "load       " << std::fixed << std::setprecision(2) << load_seconds << " s\n\n";
  if (a.model_dir.empty())
    header << (prompt.text ? "(synthetic weights: the text below is meaningless)\n\n"
                           : "(synthetic weights and no tokenizer: the token ids below mean nothing as text)\n\n");
  if (prompt.text) header << "--- output (streamed as generated) ---\n";

  // generate() checks the request before its first step, so the header is
  // printed with the first token: a refused request prints nothing on stdout.
  std::optional<StreamingDetokenizer> stream;
  if (prompt.text) stream.emplace(prompt.text->tokenizer, true);
  bool started = false;
  int undecodable = 0;
  const auto on_token = [&](std::int32_t id) {
    if (!started) std::cout << header.str(), started = true;
    if (!stream) return;
    // A model's vocabulary may be padded past the tokenizer's (Qwen2.5: 151936 vs 151665);
    // an id there has no text, and tokenizers would drop it silently.
    if (!prompt.text->tokenizer.has_id(id)) {
      std::cout << stream->finish() << kReplacementChar << std::flush;
      ++undecodable;
      return;
    }
    std::cout << stream->push(id) << std::flush;
  };
  const GenerateResult r = generate(*model, prompt.ids, gen, on_token);

  if (stream) {
    const bool stopped = !r.output_ids.empty() && std::find(prompt.stop_ids.begin(), prompt.stop_ids.end(),
                                                            r.output_ids.back()) != prompt.stop_ids.end();
    std::cout << stream->finish() << "\n--- end (" << r.output_ids.size() << " tokens, "
              << (stopped ? "stop token " + std::to_string(r.output_ids.back()) : std::string("--max-new-tokens"))
              << ") ---\n";
    if (undecodable > 0)
      std::cout << "(" << undecodable << " ids are outside the tokenizer's vocabulary and show as U+FFFD)\n";
    std::cout << "\n";
  }
  std::cout << "prompt ids   ";
  for (auto id : prompt.ids) std::cout << id << ' ';
  std::cout << "\noutput ids   ";
  for (auto id : r.output_ids) std::cout << id << ' ';
  std::cout << "\n\n"
            << "| phase   | tokens | time (ms) | tokens/s |\n"
            << "|---------|-------:|----------:|---------:|\n"
            << std::fixed << std::setprecision(1) << "| prefill | " << std::setw(6) << r.prompt_tokens << " | " << std::setw(9)
            << r.ttft() * 1e3 << " | " << std::setw(8) << r.prefill_tokens_per_second() << " |\n"
            << "| decode  | " << std::setw(6) << r.output_ids.size() - 1 << " | " << std::setw(9)
            << r.tpot() * (r.output_ids.size() - 1) * 1e3 << " | " << std::setw(8) << r.decode_tokens_per_second()
            << " |\n\n"
            << std::setprecision(2) << "TTFT " << r.ttft() * 1e3 << " ms, TPOT " << r.tpot() * 1e3
            << " ms, output hash " << token_hash(r.output_ids) << "\n";
  return 0;
}

// A token's bytes for a Markdown table cell: control characters and bytes
// that are not (yet) valid UTF-8 as escapes, so a cut character is visible.
std::string show_bytes(std::string_view bytes) {
  std::string out;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const int n = utf8_classify(bytes, pos);
    const auto c = static_cast<unsigned char>(bytes[pos]);
    if (n == 1 && (c < 0x20 || c == 0x7f || c == '|' || c == '\\')) {
      out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : c == '|' ? "\\|" : c == '\\' ? "\\\\" : "";
      if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        out += hex;
      }
      pos += 1;
    } else if (n > 0) {
      out.append(bytes.substr(pos, n));
      pos += n;
    } else {
      const std::size_t bad = n == 0 ? bytes.size() - pos : static_cast<std::size_t>(-n);
      for (std::size_t i = 0; i < bad; ++i) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(bytes[pos + i]));
        out += hex;
      }
      pos += bad;
    }
  }
  return out;
}

int run_tokenize(const TokenizeArgs& a) {
  check(!a.model_dir.empty() || !a.tokenizer_file.empty(), "tokenize needs --model DIR or --tokenizer FILE");
  check(!a.text.empty() || !a.file.empty(), "tokenize needs --text TEXT or --file F (with something in it)");
  const std::string text = a.file.empty() ? a.text : read_text_file(a.file);
  check_utf8(text, a.file.empty() ? "--text" : a.file);
  const TextSide side = load_text_side(a.tokenizer_file, a.model_dir, "tokenize");
  const Tokenizer& tok = side.tokenizer;
  const auto ids = tok.encode(text, !a.no_special_tokens);
  // Without the post-processor's tokens, so that only normalization can make the text differ.
  const std::string decoded = tok.decode(tok.encode(text, false));

  std::cout << "## servelab tokenize\n\n"
            << "tokenizer  " << tok.source() << " (" << tok.vocab_size() << " ids, " << tok.num_merges()
            << " merges, normalizer " << (tok.normalizer().form() == Normalizer::Form::NFC ? "NFC" : "none") << ")\n"
            << "text       " << text.size() << " bytes -> " << ids.size() << " tokens (special tokens "
            << (a.no_special_tokens ? "not added" : "added") << ")\n"
            << "round trip decode(ids) " << (decoded == text ? "== text" : "!= text (the tokenizer normalizes or prefixes it)")
            << "\n\nids  ";
  for (auto id : ids) std::cout << id << ' ';
  std::cout << "\n\n| # | id | piece | bytes |\n|--:|---:|---|---|\n";
  for (std::size_t i = 0; i < ids.size(); ++i)
    std::cout << "| " << i << " | " << ids[i] << " | " << show_bytes(tok.piece(ids[i])) << " | "
              << show_bytes(tok.bytes(ids[i])) << (tok.added_token(ids[i]) ? " (added)" : "") << " |\n";
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
  // Flag errors look like every other error: one line, the same prefix.
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return "servelab: error: " + std::string(e.what()) + "\n"; });
  app.require_subcommand(1);
  GenerateArgs g;
  auto* gen = app.add_subcommand("generate", "generate tokens after a prompt and print prefill/decode timings");
  auto* preset_opt = gen->add_option("--preset", g.preset, "named model shape with synthetic weights")
                         ->capture_default_str();
  gen->add_option("--model", g.model_dir, "Hugging Face model folder (config.json + *.safetensors [+ tokenizer.json])")
      ->excludes(preset_opt);
  gen->add_option("--tokenizer", g.tokenizer_file,
                  "tokenizer.json for --prompt/--chat instead of the model folder's (its folder's tokenizer_config.json "
                  "gives the chat template)");
  auto* text_opt = gen->add_option("--prompt", g.prompt, "prompt text, encoded with the tokenizer; the reply streams as text");
  auto* chat_opt = gen->add_option("--chat", g.chat, "a user message, wrapped in the model's chat template");
  gen->add_option("--system", g.system, "system message for --chat");
  auto* ids_opt = gen->add_option("--prompt-ids", g.prompt_ids, "prompt as comma-separated token ids");
  auto* len_opt = gen->add_option("--prompt-len", g.prompt_len, "length of a synthetic prompt when no ids are given")
                      ->capture_default_str();
  // One prompt source at a time.
  len_opt->excludes(ids_opt)->excludes(text_opt)->excludes(chat_opt);
  ids_opt->excludes(text_opt)->excludes(chat_opt);
  text_opt->excludes(chat_opt);
  gen->add_option("--max-new-tokens", g.max_new_tokens, "tokens to generate")->capture_default_str();
  gen->add_option("--temperature", g.temperature, "0 = greedy")->capture_default_str();
  gen->add_option("--top-k", g.top_k, "keep the k most likely tokens, 0 = all")->capture_default_str();
  gen->add_option("--top-p", g.top_p, "nucleus sampling mass")->capture_default_str();
  gen->add_option("--seed", g.seed, "sampling and synthetic-prompt seed")->capture_default_str();
  gen->add_option("--weights-seed", g.weights_seed, "seed of synthetic weights")->capture_default_str();
  gen->add_option("--threads", g.threads, "CPU threads, 0 = all cores")->capture_default_str();
  gen->add_flag("--no-kv-cache", g.no_kv_cache, "recompute the whole sequence every step (use_cache=False)");
  gen->add_flag("--deterministic", g.deterministic, "batch-invariant reductions (slower prefill)");
  gen->add_option("--attention", g.attention, "attention kernels: naive, blocked or flash (lab 05)")->capture_default_str();
  gen->add_option("--dtype", g.dtype, "f32 (exact), bf16 (half the bytes) or bf16-math (bf16 prefill arithmetic too)")->capture_default_str();
  gen->add_option("--backend", g.backend, "cpu or cuda")->capture_default_str();

  TokenizeArgs t;
  auto* tokenize = app.add_subcommand("tokenize", "print the token ids and pieces of a text");
  auto* tok_model = tokenize->add_option("--model", t.model_dir, "Hugging Face model folder with tokenizer.json");
  tokenize->add_option("--tokenizer", t.tokenizer_file, "a tokenizer.json file")->excludes(tok_model);
  auto* tok_text = tokenize->add_option("--text", t.text, "the text");
  tokenize->add_option("--file", t.file, "read the text from this UTF-8 file")->excludes(tok_text);
  tokenize->add_flag("--no-special-tokens", t.no_special_tokens,
                     "do not add the post-processor's tokens (Llama 3's <|begin_of_text|>)");
  auto* presets = app.add_subcommand("presets", "list the named model shapes");
  CLI::App* serve = nullptr;
  CLI::App* bench_serve = nullptr;
  const auto run_serve = servelab::cli::add_serve_command(app, serve);
  const auto run_bench_serve = servelab::cli::add_bench_command(app, bench_serve);
  const DisaggCommands disagg = add_disagg_commands(app);

  try {
    app.parse(argc, argv);
    g.text_flag = text_opt->count() > 0 ? "--prompt" : chat_opt->count() > 0 ? "--chat" : "";
    g.given_model = gen->get_option("--model")->count() > 0;
    g.given_prompt_ids = ids_opt->count() > 0;
    g.given_tokenizer = gen->get_option("--tokenizer")->count() > 0;
  } catch (const CLI::ParseError& e) {
    // --help exits 0; every flag error exits 1, like every other bad input.
    return app.exit(e) == 0 ? 0 : 1;
  }
  try {
    if (gen->parsed()) return run_generate(g);
    if (tokenize->parsed()) return run_tokenize(t);
    if (presets->parsed()) return run_presets();
    if (serve->parsed()) return run_serve();
    if (bench_serve->parsed()) return run_bench_serve();
    if (const int status = disagg.run(); status >= 0) return status;
  } catch (const Error& e) {
    std::cout.flush();
    std::cerr << "servelab: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "servelab: error: out of memory (try a smaller --preset or --prompt-len)\n";
    return 1;
  } catch (const std::exception& e) {
    // Anything else (a system error from the OS, a library's exception) still ends as one line and exit 1.
    std::cerr << "servelab: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
