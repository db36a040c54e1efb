// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/model_flags.h"
#include "cli/trace_flags.h"
#include "command.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/timer.h"
#include "core/utf8.h"
#include "serve/generate.h"
#include "workload/synthetic_prompt.h"
#include "text_input.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/detokenizer.h"
#include "model/pretrained.h"

namespace servelab::cli {

namespace {

struct GenerateArgs {
  ModelFlags model;
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
  bool no_kv_cache = false;
  TraceFlags trace;  // --trace, --trace-max-mb
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
    // A real model's reply ends at its eos whatever the prompt was made of.
    if (!a.model.model_dir.empty() && has_tokenizer(a.model.model_dir))
      p.stop_ids = load_stop_token_ids(a.model.model_dir, load_tokenizer(a.model.model_dir));
    return p;
  }
  const bool chat_mode = a.text_flag == "--chat";
  p.text = load_text_side(a.tokenizer_file, a.model.model_dir, a.text_flag);
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
    p.description = "--chat, the chat template of " + chat.origin();
  }
  p.stop_ids = load_stop_token_ids(p.text->config_dir, tok);
  return p;
}

// `servelab generate` steps the model without the engine's scheduler (serve/generate.h): its steps, one
// request on one contiguous block, as records the trace takes like an engine's.
void trace_generation(ChromeTrace& trace, const GenerateResult& r, const GenerateOptions& gen, bool stopped) {
  trace.begin_run(std::string("servelab generate, KV cache ") + (gen.use_kv_cache ? "on" : "off (recompute)"), false);
  trace.on_request({RequestEvent::Kind::ADDED, 0, 0.0, r.prompt_tokens, gen.max_new_tokens});
  double at = 0;
  int computed = 0;  // tokens whose KV the cache holds before the step
  for (std::size_t k = 0; k < r.step_seconds.size(); ++k) {
    const bool last = k + 1 == r.step_seconds.size();
    StepRecord s;
    s.step = static_cast<long>(k);
    s.start = at;
    s.end = at + r.step_seconds[k];
    s.forward_seconds = r.step_seconds[k];
    const bool decode = gen.use_kv_cache && k > 0;
    (decode ? s.num_decode_tokens : s.num_prefill_tokens) = r.step_tokens[k];
    s.scheduled.push_back({0, r.step_tokens[k], computed, decode, true});
    computed = gen.use_kv_cache ? computed + r.step_tokens[k] : 0;
    if (k == 0) s.first_token.push_back(0);
    if (last) {
      s.finished.push_back(0);
      s.finish_reasons.push_back(stopped ? FinishReason::STOP : FinishReason::LENGTH);
    } else {
      s.running.push_back(0);
      s.blocks.push_back({0, {0}});
    }
    s.num_blocks = 1;
    s.num_free_blocks = last ? 1 : 0;
    s.num_used_blocks_forward = 1;
    trace.on_step(s);
    at = s.end;
  }
  trace.end_run(at);
}

int run_generate(const GenerateArgs& a) {
  // An empty value is a mistake (an unset shell variable), not a request for the default.
  check(!a.given_model || !a.model.model_dir.empty(), "--model is empty (expected a Hugging Face model folder)");
  check(!a.given_tokenizer || !a.tokenizer_file.empty(), "--tokenizer is empty (expected a tokenizer.json file)");
  check(a.system.empty() || !a.chat.empty(), "--system needs --chat (it is the system message of the conversation)");
  check(a.tokenizer_file.empty() || !a.text_flag.empty(),
        "--tokenizer needs --prompt or --chat (a prompt given as ids is not tokenized)");

  const ModelOptions options = model_options(a.model);
  const std::unique_ptr<ChromeTrace> trace = open_trace(a.trace);  // an unwritable --trace fails before the load
  const double load_start = now_seconds();
  std::unique_ptr<Model> model = load_model(a.model, options);
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
         << "weights    "
         << (a.model.model_dir.empty() ? "synthetic, seed " + std::to_string(a.model.weights_seed) : a.model.model_dir)
         << ", " << (options.gguf_types ? std::string("the file's own") : dtype_name(options.weight_dtype))
         << " weights, "
         << (options.bf16_activations && options.int8_activations ? "bf16 and int8 arithmetic"
             : options.bf16_activations                           ? "bf16 prefill arithmetic"
             : options.int8_activations                           ? "int8 arithmetic"
                                                                  : "f32 activations")
         << ", cpu, " << model->num_threads() << " threads\n"
         << "kv cache   " << (gen.use_kv_cache ? "on (contiguous)" : "off (recompute every step)") << ", reductions "
         << (a.model.deterministic ? "deterministic" : "fast (library GEMMs)") << ", attention " << a.model.attention
         << "\n"
         << "sampling   "
         << (a.temperature == 0.0f ? std::string("greedy") : "temperature " + std::to_string(a.temperature))
         << ", seed " << a.seed << "\n";
  if (prompt.text) {
    header << "tokenizer  " << prompt.text->tokenizer.source() << " (" << prompt.text->tokenizer.vocab_size()
           << " ids), stop ids";
    for (auto id : prompt.stop_ids) header << ' ' << id;
    header << (prompt.stop_ids.empty() ? " none" : "") << "\n";
  }
  header << "prompt     " << prompt.ids.size() << " tokens from " << prompt.description << "\n"
         << "load       " << std::fixed << std::setprecision(2) << load_seconds << " s\n\n";
  if (a.model.model_dir.empty())
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

  const bool stopped = !r.output_ids.empty() && std::find(prompt.stop_ids.begin(), prompt.stop_ids.end(),
                                                          r.output_ids.back()) != prompt.stop_ids.end();
  if (trace) {
    trace_generation(*trace, r, gen, stopped);
    trace->close();
    std::cerr << "servelab generate: trace " << trace->summary() << "\n";
  }
  if (stream) {
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
            << std::fixed << std::setprecision(1) << "| prefill | " << std::setw(6) << r.prompt_tokens << " | "
            << std::setw(9) << r.ttft() * 1e3 << " | " << std::setw(8) << r.prefill_tokens_per_second() << " |\n"
            << "| decode  | " << std::setw(6) << r.output_ids.size() - 1 << " | " << std::setw(9)
            << r.tpot() * (r.output_ids.size() - 1) * 1e3 << " | " << std::setw(8) << r.decode_tokens_per_second()
            << " |\n\n"
            << std::setprecision(2) << "TTFT " << r.ttft() * 1e3 << " ms, TPOT " << r.tpot() * 1e3
            << " ms, output hash " << token_hash(r.output_ids) << "\n";
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  a->model.preset = "qwen2.5-0.5b";
  auto* gen = app.add_subcommand("generate", "generate tokens after a prompt and print prefill/decode timings");
  add_model_flags(*gen, a->model);
  add_trace_flags(*gen, a->trace);
  gen->add_option(
      "--tokenizer", a->tokenizer_file,
      "tokenizer.json for --prompt/--chat instead of the model folder's (its folder's tokenizer_config.json "
      "gives the chat template)");
  auto* text_opt =
      gen->add_option("--prompt", a->prompt, "prompt text, encoded with the tokenizer; the reply streams as text");
  auto* chat_opt = gen->add_option("--chat", a->chat, "a user message, wrapped in the model's chat template");
  gen->add_option("--system", a->system, "system message for --chat");
  auto* ids_opt = gen->add_option("--prompt-ids", a->prompt_ids, "prompt as comma-separated token ids");
  auto* len_opt = gen->add_option("--prompt-len", a->prompt_len, "length of a synthetic prompt when no ids are given")
                      ->capture_default_str();
  // One prompt source at a time.
  len_opt->excludes(ids_opt)->excludes(text_opt)->excludes(chat_opt);
  ids_opt->excludes(text_opt)->excludes(chat_opt);
  text_opt->excludes(chat_opt);
  gen->add_option("--max-new-tokens", a->max_new_tokens, "tokens to generate")->capture_default_str();
  gen->add_option("--temperature", a->temperature, "0 = greedy")->capture_default_str();
  gen->add_option("--top-k", a->top_k, "keep the k most likely tokens, 0 = all")->capture_default_str();
  gen->add_option("--top-p", a->top_p, "nucleus sampling mass")->capture_default_str();
  gen->add_option("--seed", a->seed, "sampling and synthetic-prompt seed")->capture_default_str();
  gen->add_flag("--no-kv-cache", a->no_kv_cache, "recompute the whole sequence every step (use_cache=False)");

  return {gen, [a, gen, text_opt, chat_opt, ids_opt] {
            a->text_flag = text_opt->count() > 0 ? "--prompt" : chat_opt->count() > 0 ? "--chat" : "";
            a->given_model = gen->get_option("--model")->count() > 0;
            a->given_prompt_ids = ids_opt->count() > 0;
            a->given_tokenizer = gen->get_option("--tokenizer")->count() > 0;
            return run_generate(*a);
          }};
}

}  // namespace servelab::cli
