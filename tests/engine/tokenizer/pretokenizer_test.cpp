// SPDX-License-Identifier: MIT
// Split regexes compiled with PCRE2: the words Qwen2's and Llama 3's
// patterns make (expected values printed by tokenizers' Split pre-tokenizer).
#include "core/error.h"
#include "test_util.h"
#include "tokenizer/pretokenizer.h"

using namespace servelab;

namespace {

const char* const kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> words(const PreTokenizer& p, std::string_view text) {
  std::vector<std::string_view> views;
  p.split(text, views);
  return {views.begin(), views.end()};
}

}  // namespace

TEST_CASE("Qwen2's split regex: letters, single digits, punctuation runs, whitespace", "[tokenizer][pretokenizer]") {
  const PreTokenizer qwen2({kQwen2}, false, "test");
  CHECK(words(qwen2, "I'm 12 apples!!  ok\n") ==
        std::vector<std::string>{"I", "'m", " ", "1", "2", " apples", "!!", " ", " ok", "\n"});
  CHECK(words(qwen2, "\ud55c\uad6d\uc5b4 KV\uce90\uc2dc!\n\n  x") ==
        std::vector<std::string>{"\ud55c\uad6d\uc5b4", " KV\uce90\uc2dc", "!\n\n", " ", " x"});
}

TEST_CASE("Llama 3's split regex groups digits by three", "[tokenizer][pretokenizer]") {
  const PreTokenizer llama3({kLlama3}, false, "test");
  CHECK(words(llama3, "Hello world 12345") == std::vector<std::string>{"Hello", " world", " ", "123", "45"});
}

TEST_CASE("the words of any text concatenate back to it, even a megabyte of spaces", "[tokenizer][pretokenizer]") {
  const PreTokenizer qwen2({kQwen2}, false, "test");
  // A long whitespace run exercises \s+(?!\S) backtracking inside the JIT's stack.
  const std::string text = std::string(1 << 20, ' ') + "x" + std::string(1000, '\n') + "\xf0\x9f\x98\x80";
  std::string joined;
  for (const auto& w : words(qwen2, text)) joined += w;
  CHECK(joined == text);
  CHECK(words(qwen2, "").empty());
}

TEST_CASE("a pattern PCRE2 cannot compile is an error naming the file and offset",
          "[tokenizer][pretokenizer][bad-input]") {
  REQUIRE_ERROR_MENTIONS(PreTokenizer({"(\\p{L}+"}, false, "tok.json"), "tok.json", "does not compile", "offset 7");
}

TEST_CASE("pre_tokenizer shapes other than byte-level splits are refused by name",
          "[tokenizer][pretokenizer][bad-input]") {
  using nlohmann::json;
  REQUIRE_ERROR_MENTIONS(PreTokenizer::from_json(json{{"type", "Metaspace"}}, "tok.json"), "tok.json", "Metaspace");
  REQUIRE_ERROR_MENTIONS(PreTokenizer::from_json(json(nullptr), "tok.json"), "pre_tokenizer is missing");
  const json no_byte_level = {
      {"type", "Sequence"},
      {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"}}}}};
  REQUIRE_ERROR_MENTIONS(PreTokenizer::from_json(no_byte_level, "tok.json"), "no ByteLevel step");
  const json removed = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Removed"}},
                          {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  REQUIRE_ERROR_MENTIONS(PreTokenizer::from_json(removed, "tok.json"), "behavior 'Removed'", "Isolated");
}

TEST_CASE("a Sequence of Splits applies each regex to the words of the one before", "[tokenizer][pretokenizer]") {
  using nlohmann::json;
  const json sequence = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "Split"}, {"pattern", {{"String", "."}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  const PreTokenizer p = PreTokenizer::from_json(sequence, "tok.json");
  CHECK_FALSE(p.add_prefix_space());
  // The String pattern is a literal dot, not "any character".
  CHECK(words(p, "v1.2 ok") == std::vector<std::string>{"v1", ".", "2", " ", "ok"});
}
