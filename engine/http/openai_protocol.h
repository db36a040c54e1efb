// SPDX-License-Identifier: MIT
/**
 * @file openai_protocol.h
 * @brief The OpenAI API as JSON: a completion or chat completion request read
 *        and checked field by field, and the objects the server answers with
 *        (a whole response, a stream chunk, an error).
 *
 * What a request may carry (anything else is ignored, as OpenAI and vLLM do):
 * @verbatim
 *  model            string            must be the served model's name (404 otherwise)
 *  prompt           string | [int]    /v1/completions: text, or token ids (a preset has no tokenizer)
 *  messages         [{role, content}] /v1/chat/completions: content a string or [{type:"text", text}]
 *  max_tokens       int >= 1          (chat: also max_completion_tokens); default: the rest of the context
 *  temperature      number >= 0       default 1; 0 = greedy
 *  top_p            number in (0, 1]  top_k  int >= -1 (-1 and 0: all)    seed  int >= 0
 *  stop             string | [string] the reply ends before the first one (not included)
 *  n                1 only
 *  stream           bool              stream_options.include_usage: bool
 *  ignore_eos       bool              vLLM's extension: generate max_tokens even past the end token
 * @endverbatim
 * Every mistake is an ApiError that names the field and what was expected; the
 * server turns it into OpenAI's error object with status 400 (404 for a model).
 */
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/sampler.h"
#include "tokenizer/chat_template.h"

namespace servelab {

/// A request the server refuses: an HTTP status and OpenAI's error fields.
class ApiError : public Error {
 public:
  /// @param http_status HTTP status (400, 401, 404, 413, 503); @param field the request field at fault, or empty.
  ApiError(int http_status, const std::string& message, std::string field = {})
      : Error(message), status(http_status), param(std::move(field)) {}
  int status;         ///< HTTP status code
  std::string param;  ///< the request field at fault ("" when none)
};

/// Most stop strings in one request (each at most kMaxStopBytes).
inline constexpr int kMaxStopStrings = 16;
/// Longest stop string, in bytes.
inline constexpr std::size_t kMaxStopBytes = 256;
/// Deepest JSON nesting a request body may have (messages[i].content[j].text is depth 4).
inline constexpr int kMaxRequestJsonDepth = 8;

/// Which endpoint a request came to.
enum class Endpoint { completions, chat_completions };

/// A checked completion or chat completion request, before tokenization.
struct CompletionRequest {
  Endpoint endpoint = Endpoint::completions;  ///< which endpoint
  std::string model;                          ///< requested model name ("" when the field was absent)
  std::optional<std::string> prompt_text;     ///< completions: the prompt as text
  std::vector<std::int32_t> prompt_ids;       ///< completions: the prompt as token ids (when not text)
  std::vector<ChatMessage> messages;          ///< chat: the conversation
  std::optional<int> max_tokens;              ///< most output tokens; unset = the rest of the context
  SamplingParams sampling{1.0f, 0, 1.0f, 0};  ///< OpenAI's defaults: temperature 1, no top-k, top_p 1
  std::vector<std::string> stop;              ///< stop strings
  bool stream = false;                        ///< answer as server-sent events
  bool include_usage = false;                 ///< stream_options.include_usage: a last chunk with usage
  bool ignore_eos = false;                    ///< keep generating past the end-of-sequence token
};

/**
 * @brief Parses and checks a request body.
 * @param vocab_size token ids in a prompt must lie in [0, vocab_size).
 * @throws ApiError (400) naming the field: not JSON, too deep, not an object, a
 *         field of the wrong type or out of range, no prompt or messages, n != 1.
 */
CompletionRequest parse_completion_request(const std::string& body, Endpoint endpoint, int vocab_size);

/// Token counts of a reply (OpenAI's `usage`).
struct Usage {
  int prompt_tokens = 0;      ///< tokens in the prompt
  int completion_tokens = 0;  ///< tokens generated
};

/// What every response object of one request shares.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::completions;  ///< text_completion or chat.completion objects
  std::string id;                             ///< "cmpl-<n>" or "chatcmpl-<n>"
  std::int64_t created = 0;                   ///< Unix seconds
  std::string model;                          ///< served model name
};

/**
 * @brief A whole (non-streamed) response: one choice with @p text, its token
 *        ids (servelab's extension, the only output of a model without a
 *        tokenizer), @p finish_reason ("stop", "length", "abort") and @p usage.
 */
nlohmann::json response_object(const ResponseHeader& header, const std::string& text,
                               const std::vector<std::int32_t>& token_ids, const std::string& finish_reason,
                               const Usage& usage);

/**
 * @brief One stream chunk: new @p text and its @p token_ids, and @p finish_reason
 *        on the last one (empty = null). A chat chunk carries them as `delta`;
 *        @p first adds the assistant role to it.
 */
nlohmann::json chunk_object(const ResponseHeader& header, const std::string& text,
                            const std::vector<std::int32_t>& token_ids, const std::string& finish_reason, bool first);

/**
 * @brief chunk_object() for the middle of one reply's stream (no finish_reason, not the first
 *        chunk) as SSE bytes, without building a JSON object per token.
 *
 * The header fields and the keys are the same in every such chunk of a reply: they are serialized
 * once, and each event only escapes its text and prints its ids between them. The bytes equal
 * `"data: " + chunk_object(header, text, ids, "", false).dump() + "\n\n"`. Measured in a loop
 * of its own: 0.17 µs a chunk, against 2.9 µs for building and dumping the JSON object
 * (docs/serving.md, "HTTP overhead").
 */
class ChunkFormat {
 public:
  /// Serializes the parts of @p header's chunks that do not change.
  explicit ChunkFormat(const ResponseHeader& header);
  /// Appends one event carrying @p text (valid UTF-8, else nlohmann's type_error as dump() throws) and @p token_ids.
  void append_event(std::string& out, const std::string& text, std::span<const std::int32_t> token_ids) const;

 private:
  std::string before_text_, before_ids_, after_ids_;  // the chunk around its text and its ids' array
};

/// The chunk `stream_options.include_usage` asks for: no choices, the usage.
nlohmann::json usage_chunk(const ResponseHeader& header, const Usage& usage);

/// OpenAI's error object: {"error": {"message", "type", "param", "code"}}.
nlohmann::json error_object(int status, const std::string& message, const std::string& param = {});

}  // namespace servelab
