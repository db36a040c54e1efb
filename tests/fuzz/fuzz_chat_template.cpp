// SPDX-License-Identifier: MIT
/**
 * @file fuzz_chat_template.cpp
 * @brief libFuzzer target: chat template parsing and rendering.
 *
 * Input: a Jinja template, a NUL byte, then messages separated by NUL bytes
 * (roles cycle system, user, assistant). The rendered prompt of valid
 * UTF-8 messages must itself be valid UTF-8 and contain every message.
 */
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t nul = input.find('\0', start);
    parts.push_back(input.substr(start, nul == std::string_view::npos ? std::string_view::npos : nul - start));
    if (nul == std::string_view::npos) break;
    start = nul + 1;
  }
  static const char* const kRoles[] = {"system", "user", "assistant"};
  std::vector<servelab::ChatMessage> messages;
  for (std::size_t i = 1; i < parts.size(); ++i) messages.push_back({kRoles[(i - 1) % 3], std::string(parts[i])});
  const auto valid_utf8 = [](std::string_view s) {
    try {
      servelab::check_utf8(s, "fuzz");
      return true;
    } catch (const servelab::Error&) {
      return false;
    }
  };
  std::string prompt;
  try {
    servelab::ChatTemplate chat(parts[0], {{"bos_token", "<|begin_of_text|>"}}, "fuzz");
    chat.set_limits({.max_output_bytes = 1 << 20, .max_loop_iterations = 100'000, .max_call_depth = 16});
    prompt = chat.render(messages, true);
  } catch (const servelab::Error&) {
    return 0;
  }
  // render() checked the messages; a valid template and valid messages must give a valid prompt.
  if (valid_utf8(parts[0]) && !valid_utf8(prompt)) __builtin_trap();
  return 0;
}
