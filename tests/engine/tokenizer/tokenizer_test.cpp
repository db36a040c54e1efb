// SPDX-License-Identifier: MIT
// The tokenizer against Hugging Face tokenizers: the same ids for every string
// of the reference corpus (Korean, emoji, NFD text, odd whitespace, special
// tokens in text, random Unicode), the same decoded text, and clear errors
// for what it cannot or will not read.
#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_fixtures.h"

using namespace servelab;
using namespace servelab::test;

namespace {

const char* const kFamilies[] = {"qwen2-style", "llama3-style", "gpt2-style"};

}  // namespace

TEST_CASE("encode gives Hugging Face tokenizers' ids for every corpus string", "[tokenizer][golden]") {
  for (const char* name : kFamilies) {
    DYNAMIC_SECTION(name) {
      const Tokenizer tok = Tokenizer::from_file(tokenizer_fixtures() / name / "tokenizer.json");
      const auto& ref = tokenizer_reference()[name];
      CHECK(tok.vocab_size() == ref["vocab_size"].get<int>());
      for (const auto& c : ref["corpus"]) {
        const std::string text = c["text"];
        INFO("text: \"" << text << "\"");
        CHECK(tok.encode(text, false) == c["ids"].get<std::vector<std::int32_t>>());
        CHECK(tok.encode(text, true) == c["ids_with_special"].get<std::vector<std::int32_t>>());
      }
    }
  }
}

TEST_CASE("decode gives Hugging Face tokenizers' text, and pieces their vocabulary spelling", "[tokenizer][golden]") {
  for (const char* name : kFamilies) {
    DYNAMIC_SECTION(name) {
      const Tokenizer tok = Tokenizer::from_file(tokenizer_fixtures() / name / "tokenizer.json");
      for (const auto& c : tokenizer_reference()[name]["corpus"]) {
        const auto ids = c["ids"].get<std::vector<std::int32_t>>();
        INFO("text: \"" << c["text"].get<std::string>() << "\"");
        CHECK(tok.decode(ids, false) == c["decoded"].get<std::string>());
        CHECK(tok.decode(ids, true) == c["decoded_skip_special"].get<std::string>());
        std::vector<std::string> pieces;
        for (auto id : ids) pieces.push_back(tok.piece(id));
        CHECK(pieces == c["tokens"].get<std::vector<std::string>>());
      }
      for (const auto& c : tokenizer_reference()[name]["decode_cases"]) {
        const auto ids = c["ids"].get<std::vector<std::int32_t>>();
        INFO("ids: " << c["ids"].dump());
        CHECK(tok.decode(ids, false) == c["text"].get<std::string>());
        CHECK(tok.decode(ids, true) == c["text_skip_special"].get<std::string>());
      }
    }
  }
}

// The expected NFC form comes from Python's unicodedata, not from utf8proc, which the tokenizer itself uses.
TEST_CASE("decode(encode(text)) gives the text back (NFC-normalized where the tokenizer normalizes)", "[tokenizer]") {
  for (const char* name : kFamilies) {
    DYNAMIC_SECTION(name) {
      const Tokenizer tok = Tokenizer::from_file(tokenizer_fixtures() / name / "tokenizer.json");
      const bool normalizes = tok.normalizer().form() == Normalizer::Form::NFC;
      const bool prefix_space = std::string(name) == "gpt2-style";
      for (const auto& c : tokenizer_reference()[name]["corpus"]) {
        const std::string text = c["text"];
        if (prefix_space || text.empty()) continue;  // add_prefix_space changes the text on purpose
        INFO("text: \"" << text << "\"");
        CHECK(tok.decode(tok.encode(text, false)) == (normalizes ? c["nfc"].get<std::string>() : text));
      }
    }
  }
}

TEST_CASE("the special tokens of the text are found before the regex runs", "[tokenizer]") {
  const Tokenizer tok = Tokenizer::from_file(tokenizer_fixtures() / "qwen2-style" / "tokenizer.json");
  const std::int32_t start = *tok.token_to_id("<|im_start|>"), end = *tok.token_to_id("<|im_end|>");
  const auto ids = tok.encode("<|im_start|>user<|im_end|>", false);
  REQUIRE(ids.size() >= 3);
  CHECK(ids.front() == start);
  CHECK(ids.back() == end);
  CHECK(tok.added_token(end)->special);
  CHECK(tok.decode(ids, true) == "user");
}

TEST_CASE("text that is not UTF-8 is refused with the offset of the bad byte", "[tokenizer][bad-input]") {
  const Tokenizer tok = Tokenizer::from_file(tokenizer_fixtures() / "qwen2-style" / "tokenizer.json");
  REQUIRE_ERROR_MENTIONS(tok.encode("caf\xc3"), "invalid UTF-8", "byte offset 3");
  REQUIRE_ERROR_MENTIONS(tok.encode("\xff\xfe"), "invalid UTF-8", "byte offset 0");
}

TEST_CASE("decoding an id the tokenizer does not have is an error naming the id", "[tokenizer][bad-input]") {
  const Tokenizer tok = Tokenizer::from_file(tokenizer_fixtures() / "qwen2-style" / "tokenizer.json");
  const std::vector<std::int32_t> too_big = {1, 2, 5000}, negative = {-1};
  REQUIRE_ERROR_MENTIONS(tok.decode(too_big), "token id 5000", "outside the tokenizer's vocabulary [0, 1027)");
  REQUIRE_ERROR_MENTIONS(tok.decode(negative), "token id -1");
  REQUIRE_ERROR_MENTIONS(tok.piece(1027), "token id 1027");
}

TEST_CASE("a missing, truncated or non-tokenizer file is an error naming the file", "[tokenizer][bad-input]") {
  ScratchDir dir("tokenizer");
  REQUIRE_ERROR_MENTIONS(Tokenizer::from_file(dir.path() / "none.json"), "none.json", "cannot open");
  const auto truncated = dir.path() / "tokenizer.json";
  {
    std::ifstream in(tokenizer_fixtures() / "qwen2-style" / "tokenizer.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated) << text.substr(0, text.size() / 2);
  }
  REQUIRE_ERROR_MENTIONS(Tokenizer::from_file(truncated), truncated.string(), "not valid JSON");
  std::ofstream(truncated) << R"({"version": "1.0"})";
  REQUIRE_ERROR_MENTIONS(Tokenizer::from_file(truncated), "no \"model\" field");
}

TEST_CASE("tokenizers that are not byte-level BPE are refused, naming the field", "[tokenizer][bad-input]") {
  auto json = tokenizer_json("qwen2-style");
  SECTION("a WordPiece model") {
    json["model"]["type"] = "WordPiece";
    REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "x/tokenizer.json"), "x/tokenizer.json", "model.type",
                           "'WordPiece'", "expected BPE");
  }
  SECTION("SentencePiece-style byte fallback") {
    json["model"]["byte_fallback"] = true;
    REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "t.json"), "model.byte_fallback");
  }
  SECTION("a Metaspace decoder") {
    json["decoder"] = {{"type", "Metaspace"}};
    REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "t.json"), "decoder type 'Metaspace'");
  }
  SECTION("an NFKC normalizer") {
    json["normalizer"] = {{"type", "NFKC"}};
    REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "t.json"), "normalizer type 'NFKC'");
  }
  SECTION("an added token with lstrip") {
    json["added_tokens"][0]["lstrip"] = true;
    REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "t.json"), "added_tokens[0]", "lstrip");
  }
  SECTION("a merge of a token that is not in the vocabulary") {
    json["model"]["merges"][0] = "\u0120 zzz";
    REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "t.json"), "model.merges[0]", "'zzz' is not in model.vocab");
  }
  SECTION("a malformed merge") {
    json["model"]["merges"][3] = "abc";
    REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "t.json"), "model.merges[3]", "one space");
  }
  SECTION("a vocabulary entry of the wrong JSON type") {
    json["model"]["vocab"] = "not an object";
    REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "t.json"), "t.json", "model.vocab");
  }
  SECTION("a RoBERTa post-processor") {
    json["post_processor"] = {{"type", "RobertaProcessing"}};
    REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "t.json"), "post_processor type 'RobertaProcessing'");
  }
}

// Ids are narrowed to int32 and index dense tables: an added-token id of 2^31
// wrote out of bounds, 2^31 - 1 overflowed id + 1, and a post-processor id of
// 2^32 became 0.
TEST_CASE("token ids past the table limit are refused, naming the field", "[tokenizer][bad-input]") {
  for (const std::int64_t id : {std::int64_t{1} << 31, (std::int64_t{1} << 31) - 1, std::int64_t{kMaxTokenIds}}) {
    auto json = tokenizer_json("qwen2-style");
    json["added_tokens"].back()["id"] = id;
    INFO("id " << id);
    REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "t.json"), "t.json: added_tokens[",
                           "].id must be an integer in [0, 4194303], got " + std::to_string(id));
  }
  auto json = tokenizer_json("qwen2-style");
  json["model"]["vocab"]["hello"] = std::int64_t{1} << 32;
  REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "t.json"), "t.json: model.vocab['hello'] must be an integer");
  json = tokenizer_json("llama3-style");
  json["post_processor"]["processors"][1]["special_tokens"]["<|begin_of_text|>"]["ids"] = {std::int64_t{1} << 32};
  REQUIRE_ERROR_MENTIONS(Tokenizer::from_json(json, "t.json"), "post_processor.special_tokens['<|begin_of_text|>'].ids",
                         "got 4294967296");
}
