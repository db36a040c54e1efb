// SPDX-License-Identifier: MIT
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include "command.h"
#include "core/error.h"
#include "core/utf8.h"
#include "text_input.h"
#include "tokenizer/normalizer.h"

namespace servelab::cli {

namespace {

struct TokenizeArgs {
  std::string model_dir;
  std::string tokenizer_file;
  std::string text;
  std::string file;
  bool no_special_tokens = false;
};

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
            << "round trip decode(ids) "
            << (decoded == text ? "== text" : "!= text (the tokenizer normalizes or prefixes it)") << "\n\nids  ";
  for (auto id : ids) std::cout << id << ' ';
  std::cout << "\n\n| # | id | piece | bytes |\n|--:|---:|---|---|\n";
  for (std::size_t i = 0; i < ids.size(); ++i)
    std::cout << "| " << i << " | " << ids[i] << " | " << show_bytes(tok.piece(ids[i])) << " | "
              << show_bytes(tok.bytes(ids[i])) << (tok.added_token(ids[i]) ? " (added)" : "") << " |\n";
  return 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  auto* tokenize = app.add_subcommand("tokenize", "print the token ids and pieces of a text");
  auto* tok_model = tokenize->add_option("--model", a->model_dir, "Hugging Face model folder with tokenizer.json");
  tokenize->add_option("--tokenizer", a->tokenizer_file, "a tokenizer.json file")->excludes(tok_model);
  auto* tok_text = tokenize->add_option("--text", a->text, "the text");
  tokenize->add_option("--file", a->file, "read the text from this UTF-8 file")->excludes(tok_text);
  tokenize->add_flag("--no-special-tokens", a->no_special_tokens,
                     "do not add the post-processor's tokens (Llama 3's <|begin_of_text|>)");
  return {tokenize, [a] { return run_tokenize(*a); }};
}

}  // namespace servelab::cli
