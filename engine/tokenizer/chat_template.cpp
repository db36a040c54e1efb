// SPDX-License-Identifier: MIT
#include "tokenizer/chat_template.h"

#include "core/error.h"
#include "core/utf8.h"
#include "template/text.h"

namespace servelab {

namespace {

// transformers 5's message preparation: keys whose value is null are dropped
// (_normalize_chat_messages), and reasoning given under any of its names is
// copied under `thinking` (first) and `reasoning_content` (_alias_reasoning_fields).
nlohmann::ordered_json prepare_message(const nlohmann::ordered_json& m, std::size_t index) {
  check(m.is_object(), "chat: message ", index, " is not an object");
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [k, v] : m.items())
    if (!v.is_null()) out[k] = v;
  for (const char* field : {"reasoning_content", "thinking", "reasoning"}) {
    if (!out.contains(field)) continue;
    const nlohmann::ordered_json reasoning = out[field];
    nlohmann::ordered_json aliased = nlohmann::ordered_json::object();
    aliased["thinking"] = reasoning;
    for (const auto& [k, v] : out.items()) aliased[k] = v;
    aliased["reasoning_content"] = reasoning;
    return aliased;
  }
  return out;
}

jinja::Value strftime_now(const std::function<std::time_t()>& now, const jinja::Args& args) {
  if (args.positional.size() != 1 || !args.positional[0].is_string() || !args.keyword.empty())
    jinja::issue("strftime_now() takes one format string");
  const std::time_t t = now ? now() : std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  char buf[512];
  const std::size_t n = std::strftime(buf, sizeof buf, args.positional[0].as_string().c_str(), &local);
  if (n == 0 && !args.positional[0].as_string().empty())
    jinja::issue("strftime_now(): the formatted date is empty or too long");
  return jinja::Value::string(std::string(buf, n));
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view source, SpecialTokens special_tokens, std::string origin)
    : template_(source, std::move(origin)), special_tokens_(std::move(special_tokens)) {}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  check(!messages.empty(), "chat: no messages to render");
  ChatInputs inputs;
  inputs.add_generation_prompt = add_generation_prompt;
  for (const auto& m : messages) {
    check_utf8(m.content, "chat message (" + m.role + ")");
    inputs.messages.push_back({{"role", m.role}, {"content", m.content}});
  }
  return render(inputs);
}

std::string ChatTemplate::render(const ChatInputs& inputs) const {
  check(inputs.messages.is_array(), "chat: messages must be a list");
  // As transformers: the special tokens first, then the caller's variables, which win.
  jinja::Dict vars;
  for (const auto& [name, token] : special_tokens_) vars.set(name, jinja::Value::string(token));
  for (const auto& [k, v] : inputs.extra.items()) vars.set(k, jinja::Value::from_json(v));
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < inputs.messages.size(); ++i) messages.push_back(prepare_message(inputs.messages[i], i));
  vars.set("messages", jinja::Value::from_json(messages));
  vars.set("tools", jinja::Value::from_json(inputs.tools));
  vars.set("documents", jinja::Value::from_json(inputs.documents));
  vars.set("add_generation_prompt", jinja::Value::boolean(inputs.add_generation_prompt));
  const auto now = now_;
  vars.set("strftime_now",
           jinja::Value::function("strftime_now", [now](const jinja::Args& a) { return strftime_now(now, a); }));
  return template_.render(vars, limits_);
}

}  // namespace servelab
