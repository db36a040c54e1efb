// SPDX-License-Identifier: MIT
#include "tokenizer/chat_template.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace servelab {

namespace {

// The template's first characters, on one line, for error messages.
std::string quote_start(std::string_view jinja) {
  std::string head(jinja.substr(0, 60));
  for (char& c : head)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return "\"" + head + (jinja.size() > 60 ? "...\"" : "\"");
}

// Reads a constant default system prompt out of a ChatML template: the text
// of a string literal '<|im_start|>system\n...<|im_end|>' with no
// concatenation inside. Jinja escapes in the literal are undone.
std::string default_system_prompt(std::string_view jinja) {
  constexpr std::string_view kOpen = "<|im_start|>system\\n", kClose = "<|im_end|>";
  for (std::size_t at = jinja.find(kOpen); at != std::string_view::npos; at = jinja.find(kOpen, at + 1)) {
    const std::size_t begin = at + kOpen.size();
    const std::size_t end = jinja.find(kClose, begin);
    if (end == std::string_view::npos) break;
    const std::string_view literal = jinja.substr(begin, end - begin);
    if (literal.find_first_of("'\"") != std::string_view::npos) continue;  // `' + messages[0]['content'] + '`
    std::string text;
    for (std::size_t i = 0; i < literal.size(); ++i) {
      if (literal[i] != '\\' || i + 1 == literal.size()) {
        text += literal[i];
        continue;
      }
      const char e = literal[++i];
      text += e == 'n' ? '\n' : e == 't' ? '\t' : e;
    }
    return text;
  }
  return {};
}

// Python's str.strip(), which Jinja's `trim` filter calls: Unicode whitespace at both ends.
bool is_python_space(char32_t c) {
  constexpr std::array<char32_t, 8> kOther = {0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || (c >= 0x2000 && c <= 0x200A)) return true;
  return std::find(kOther.begin(), kOther.end(), c) != kOther.end();
}

std::string trim(const std::string& s) {
  std::size_t begin = s.size(), end = 0;  // first and one past the last non-space byte
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t start = pos;
    if (!is_python_space(next_code_point(s, pos))) begin = std::min(begin, start), end = pos;
  }
  return begin < end ? s.substr(begin, end - begin) : std::string();
}

}  // namespace

ChatTemplate ChatTemplate::recognise(std::string_view jinja, std::string bos_token, const std::string& source) {
  const auto has = [&](std::string_view s) { return jinja.find(s) != std::string_view::npos; };
  if (has("<|im_start|>")) {
    check(!has("<think>") && !has("reasoning_content"), source,
          ": chat_template is ChatML with reasoning (<think>) blocks, which servelab does not render");
    return ChatTemplate(Format::ChatML, default_system_prompt(jinja), std::move(bos_token));
  }
  if (has("<|start_header_id|>")) {
    check(!has("Cutting Knowledge Date"), source,
          ": chat_template is Llama 3.1-style (with a 'Cutting Knowledge Date' system header), which servelab does "
          "not render; it renders Llama 3 and ChatML");
    return ChatTemplate(Format::Llama3, "", std::move(bos_token));
  }
  fail(source,
       ": chat_template is not a format servelab recognises (it renders ChatML, as in Qwen2/Qwen2.5, and "
       "Llama 3); the template starts ",
       quote_start(jinja));
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  check(!messages.empty(), "chat: no messages to render");
  for (const auto& m : messages) {
    check(m.role == "system" || m.role == "user" || m.role == "assistant", "chat: role '", m.role,
          "' is not supported (expected system, user or assistant)");
    check_utf8(m.content, "chat message (" + m.role + ")");
  }
  std::string out;
  if (format_ == Format::ChatML) {
    if (messages[0].role != "system" && !default_system_.empty())
      out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
    for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
  } else {
    out += bos_token_;
    for (const auto& m : messages)
      out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  return out;
}

}  // namespace servelab
