// SPDX-License-Identifier: MIT
// End to end on a model folder with config.json, safetensors and
// tokenizer.json: chat text in, transformers' ids and reply text out.
#include "core/error.h"
#include "model/model.h"
#include "serve/generate.h"
#include "tokenizer/detokenizer.h"
#include "model/pretrained.h"
#include "tokenizer/tokenizer_fixtures.h"

using namespace servelab;
using namespace servelab::test;

// The folder, and the same model, tokenizer and template converted into one GGUF file (tools/make_gguf.py --from).
TEST_CASE("qwen2-tiny-chat: chat -> prompt ids -> greedy reply -> text, as transformers",
          "[tokenizer][golden][generate][gguf]") {
  const auto ref = load_reference("tokenizer/qwen2-tiny-chat");
  for (const auto& dir : {tokenizer_fixtures() / "qwen2-tiny-chat", fixtures_dir() / "gguf" / "qwen2-tiny-chat.gguf"}) {
    DYNAMIC_SECTION(dir.filename().string()) {
      auto model = Model::from_pretrained(dir, ModelOptions{});
      const Tokenizer tok = load_tokenizer(dir);
      REQUIRE(tok.vocab_size() <= model->config().vocab_size);

      std::vector<ChatMessage> messages;
      for (const auto& m : ref["messages"]) messages.push_back({m["role"], m["content"]});
      const std::string prompt_text = load_chat_template(dir).render(messages, true);
      CHECK(prompt_text == ref["prompt_text"].get<std::string>());
      const auto prompt = tok.encode(prompt_text, false);
      CHECK(prompt == ref["prompt_ids"].get<std::vector<std::int32_t>>());

      GenerateOptions options;
      options.max_new_tokens = 16;
      options.stop_token_ids = load_stop_token_ids(dir, tok);
      CHECK(options.stop_token_ids == ref["eos_token_ids"].get<std::vector<std::int32_t>>());
      StreamingDetokenizer stream(tok);
      std::string streamed;
      const auto result = generate(*model, prompt, options, [&](std::int32_t id) { streamed += stream.push(id); });
      streamed += stream.finish();
      CHECK(result.output_ids == ref["output_ids"].get<std::vector<std::int32_t>>());
      CHECK(streamed == ref["output_text"].get<std::string>());
      CHECK(tok.decode(result.output_ids, true) == ref["output_text"].get<std::string>());
    }
  }
}

TEST_CASE("stop tokens come from generation_config.json, else tokenizer_config.json's eos_token", "[tokenizer]") {
  const auto dir = tokenizer_fixtures() / "qwen2-style";  // no generation_config.json
  const Tokenizer tok = load_tokenizer(dir);
  CHECK(load_stop_token_ids(dir, tok) == std::vector<std::int32_t>{*tok.token_to_id("<|im_end|>")});
  ScratchDir scratch("stop-ids");
  std::ofstream(scratch.path() / "generation_config.json") << R"({"eos_token_id": 7})";
  CHECK(load_stop_token_ids(scratch.path(), tok) == std::vector<std::int32_t>{7});
  std::ofstream(scratch.path() / "generation_config.json") << R"({"eos_token_id": [5, 99999]})";
  REQUIRE_ERROR_MENTIONS(load_stop_token_ids(scratch.path(), tok), "generation_config.json", "eos_token_id", "99999");
  std::ofstream(scratch.path() / "generation_config.json") << R"({"eos_token_id": null})";
  CHECK(load_stop_token_ids(scratch.path(), tok).empty());
}

TEST_CASE("a model folder without tokenizer.json is an error naming the file", "[tokenizer][bad-input]") {
  const auto dir = fixtures_dir() / "qwen2-tiny";
  REQUIRE_ERROR_MENTIONS(load_tokenizer(dir), (dir / "tokenizer.json").string(), "no tokenizer.json");
}

TEST_CASE("a chat template is executed, and one servelab cannot run is an error naming the file",
          "[tokenizer][chat][bad-input]") {
  ScratchDir scratch("template");
  std::ofstream(scratch.path() / "tokenizer_config.json")
      << R"({"chat_template": [{"name": "tool_use", "template": "T"},)"
      << R"( {"name": "default", "template": "{% for m in messages %}<<{{ m.role }}>>{% endfor %}"}]})";
  const std::vector<ChatMessage> hi = {{"user", "hi"}};
  CHECK(load_chat_template(scratch.path()).render(hi, false) == "<<user>>");
  std::ofstream(scratch.path() / "tokenizer_config.json")
      << R"({"chat_template": "{% for m in messages %}{{ m.role | wordwrap }}{% endfor %}"})";
  REQUIRE_ERROR_MENTIONS(load_chat_template(scratch.path()), "tokenizer_config.json", "line 1", "filter 'wordwrap'",
                         "not supported");
  std::ofstream(scratch.path() / "tokenizer_config.json") << R"({"chat_template": )";
  REQUIRE_ERROR_MENTIONS(load_chat_template(scratch.path()), "tokenizer_config.json", "not valid JSON");
}
