// SPDX-License-Identifier: MIT
/**
 * @file chat_template.h
 * @brief Chat templates: turn a list of messages into the prompt text an
 *        instruction-tuned model was trained on, by running the model's own
 *        Jinja template as transformers' `apply_chat_template` does.
 *
 * Hugging Face stores the template as a Jinja program in
 * tokenizer_config.json (or chat_template.jinja); a GGUF file stores it as
 * `tokenizer.chat_template`. servelab executes it with its own interpreter
 * (engine/template/), set up as transformers sets up jinja2, with the
 * variables transformers passes:
 * @verbatim
 *   messages               [{"role": "user", "content": "hi"}, ...]   keys whose value is null dropped
 *   tools, documents       the lists given, else None
 *   add_generation_prompt  end with the header of the assistant's turn
 *   bos_token, eos_token,  the tokenizer's special tokens that are set
 *   unk_token, pad_token ...
 *   strftime_now(fmt)      the local time, formatted
 * @endverbatim
 * So a default system prompt, a date header or a tool list come out exactly
 * as the template writes them; a template that uses a construct the
 * interpreter lacks is refused at construction, naming the construct and the
 * line (docs/chat_templates.md).
 */
#pragma once

#include <ctime>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "template/template.h"

namespace servelab {

/// One message of a conversation.
struct ChatMessage {
  std::string role;     ///< "system", "user", "assistant" (or any role the template accepts)
  std::string content;  ///< UTF-8 text
};

/// Everything a render can pass the template, for callers with more than role/content messages.
struct ChatInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  ///< list of message objects
  nlohmann::ordered_json tools = nullptr;                             ///< list of tool (function) schemas, or null
  nlohmann::ordered_json documents = nullptr;                         ///< list of {title, text}, or null
  bool add_generation_prompt = true;                                  ///< end with the assistant header
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();    ///< more variables (enable_thinking, ...)
};

/// A chat template, parsed once.
class ChatTemplate {
 public:
  /// The tokenizer's special tokens by name ({"bos_token", "<s>"}, ...), as transformers' special_tokens_map.
  using SpecialTokens = std::vector<std::pair<std::string, std::string>>;

  /**
   * @brief Parses a chat template.
   * @param source the Jinja source (tokenizer_config.json's `chat_template`, chat_template.jinja, or GGUF's
   *        `tokenizer.chat_template`).
   * @param special_tokens names the template can read; tokens that are not set are left out.
   * @param origin names the template in errors (a file name).
   * @throws Error "<origin>: chat template line N: ..." for a syntax error or a statement, filter or test the
   *         interpreter does not implement (named).
   */
  ChatTemplate(std::string_view source, SpecialTokens special_tokens, std::string origin);

  /// Where the template came from (the origin given).
  const std::string& origin() const { return template_.origin(); }

  /**
   * @brief The prompt text for @p messages.
   * @param add_generation_prompt end with the header of an assistant turn, so the model writes the reply.
   * @throws Error when @p messages is empty, a message is not valid UTF-8, or the template fails or
   *         refuses (raise_exception's message, or the construct and line).
   */
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  /// As render(), with messages of any shape, tools, documents and extra variables.
  std::string render(const ChatInputs& inputs) const;

  /// Replaces the clock strftime_now() reads (seconds since the epoch, shown in local time); for tests.
  void set_clock(std::function<std::time_t()> now) { now_ = std::move(now); }

  /// The bounds one render runs under.
  void set_limits(const jinja::Limits& limits) { limits_ = limits; }

 private:
  jinja::Template template_;
  SpecialTokens special_tokens_;
  std::function<std::time_t()> now_;
  jinja::Limits limits_;
};

}  // namespace servelab
