// SPDX-License-Identifier: MIT
// Chat templates: servelab's rendering of ChatML and Llama 3 against
// transformers' apply_chat_template on the same Jinja template.
#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/pretrained.h"
#include "tokenizer_fixtures.h"

using namespace servelab;
using namespace servelab::test;

namespace {

std::vector<ChatMessage> messages_of(const nlohmann::json& conversation) {
  std::vector<ChatMessage> messages;
  for (const auto& m : conversation["messages"]) messages.push_back({m["role"], m["content"]});
  return messages;
}

}  // namespace

TEST_CASE("chat templates render and tokenize exactly as transformers' apply_chat_template",
          "[tokenizer][chat][golden]") {
  for (const auto& [name, format] : {std::pair{"qwen2-style", "ChatML"}, {"llama3-style", "Llama 3"}}) {
    DYNAMIC_SECTION(name) {
      const auto dir = tokenizer_fixtures() / name;
      const ChatTemplate chat = load_chat_template(dir);
      const Tokenizer tok = load_tokenizer(dir);
      CHECK(std::string(chat.name()) == format);
      for (const auto& conversation : tokenizer_reference()[name]["chat"]) {
        INFO("conversation: " << conversation["messages"].dump());
        const std::string text = chat.render(messages_of(conversation), conversation["add_generation_prompt"]);
        CHECK(text == conversation["text"].get<std::string>());
        // apply_chat_template(tokenize=True) encodes without adding special tokens: the template has them.
        CHECK(tok.encode(text, false) == conversation["ids"].get<std::vector<std::int32_t>>());
      }
    }
  }
}

TEST_CASE("a ChatML template's default system prompt is read from the template", "[tokenizer][chat]") {
  CHECK(load_chat_template(tokenizer_fixtures() / "qwen2-style").default_system() ==
        "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  // transformers >= 4.43 writes the template to chat_template.jinja instead.
  CHECK(load_chat_template(tokenizer_fixtures() / "qwen2-tiny-chat").default_system() ==
        "You are a helpful assistant.");
  const auto plain = ChatTemplate::recognise(
      "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}", "",
      "t");
  CHECK(plain.default_system().empty());
  const std::vector<ChatMessage> hi = {{"user", "hi"}};
  CHECK(plain.render(hi, true) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("unknown templates, unsupported variants and roles are errors that say which",
          "[tokenizer][chat][bad-input]") {
  REQUIRE_ERROR_MENTIONS(
      ChatTemplate::recognise("{{ bos_token }}{% for m in messages %}[INST] {{ m.content }}", "", "cfg.json"),
      "cfg.json", "not a format servelab recognises", "ChatML", "Llama 3", "[INST]");
  REQUIRE_ERROR_MENTIONS(ChatTemplate::recognise("<|im_start|>{% if reasoning_content %}<think>", "", "cfg.json"),
                         "reasoning");
  REQUIRE_ERROR_MENTIONS(
      ChatTemplate::recognise("<|start_header_id|>system Cutting Knowledge Date: December 2023", "", "cfg.json"),
      "Llama 3.1");
  const ChatTemplate chat(ChatTemplate::Format::ChatML, "", "");
  const std::vector<ChatMessage> tool = {{"tool", "{}"}}, bad_utf8 = {{"user", "\xff"}};
  REQUIRE_ERROR_MENTIONS(chat.render(tool, true), "role 'tool'", "system, user or assistant");
  REQUIRE_ERROR_MENTIONS(chat.render({}, true), "no messages");
  REQUIRE_ERROR_MENTIONS(chat.render(bad_utf8, true), "chat message (user)", "invalid UTF-8");
}

TEST_CASE("a folder without a chat template says so", "[tokenizer][chat][bad-input]") {
  const auto dir = tokenizer_fixtures() / "gpt2-style";
  REQUIRE_ERROR_MENTIONS(load_chat_template(dir), dir.string(), "no chat template");
}
