// SPDX-License-Identifier: MIT
/**
 * @file chat_template.h
 * @brief Chat templates: turn a list of messages into the prompt text an
 *        instruction-tuned model was trained on.
 *
 * Hugging Face stores the template as a Jinja program in
 * tokenizer_config.json (or chat_template.jinja). servelab does not run
 * Jinja: it recognises the two formats its models use and renders them in
 * C++, and the tests compare the result with transformers'
 * `apply_chat_template` on the same template.
 * @verbatim
 *   ChatML (Qwen2, Qwen2.5)                    Llama 3
 *   <|im_start|>system\n{system}<|im_end|>\n    <|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n
 *   <|im_start|>user\n{content}<|im_end|>\n     {content, trimmed}<|eot_id|>
 *   <|im_start|>assistant\n                     <|start_header_id|>assistant<|end_header_id|>\n\n
 * @endverbatim
 * A ChatML template may carry a default system prompt, used when the first
 * message is not a system message ("You are Qwen, created by Alibaba Cloud.
 * You are a helpful assistant." in Qwen2.5); it is read from the template.
 */
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace servelab {

/// One message of a conversation.
struct ChatMessage {
  std::string role;     ///< "system", "user" or "assistant"
  std::string content;  ///< UTF-8 text
};

/// A recognised chat template.
class ChatTemplate {
 public:
  /// The prompt formats servelab renders.
  enum class Format { ChatML, Llama3 };

  /**
   * @brief Recognises a Jinja chat template.
   * @param jinja the template source, as in tokenizer_config.json's `chat_template`.
   * @param bos_token the tokenizer's bos_token (Llama 3 starts the prompt with it); may be empty.
   * @param source names the file in errors.
   * @throws Error quoting the template's beginning when it is neither ChatML nor
   *         Llama 3, or is a variant whose extra behaviour servelab does not
   *         reproduce (reasoning blocks, Llama 3.1's date header).
   */
  static ChatTemplate recognise(std::string_view jinja, std::string bos_token, const std::string& source);

  /// Builds a template of a known format directly.
  ChatTemplate(Format format, std::string default_system, std::string bos_token)
      : format_(format), default_system_(std::move(default_system)), bos_token_(std::move(bos_token)) {}

  /// Which format.
  Format format() const { return format_; }
  /// "ChatML" or "Llama 3".
  const char* name() const { return format_ == Format::ChatML ? "ChatML" : "Llama 3"; }
  /// ChatML: the system prompt used when the conversation has none (may be empty).
  const std::string& default_system() const { return default_system_; }

  /**
   * @brief The prompt text for @p messages.
   * @param add_generation_prompt end with the header of an assistant turn, so the model writes the reply.
   * @throws Error when @p messages is empty or a role is not system, user or assistant.
   */
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

 private:
  Format format_;
  std::string default_system_;
  std::string bos_token_;
};

}  // namespace servelab
