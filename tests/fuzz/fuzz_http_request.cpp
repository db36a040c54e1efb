// SPDX-License-Identifier: MIT
/**
 * @file fuzz_http_request.cpp
 * @brief libFuzzer target: one request body through every check `servelab serve` makes before the
 *        engine sees it (check_request(): the JSON fields, the model name, the chat template,
 *        tokenization with the fixture tokenizer, the context length), at both endpoints, and the
 *        error object a refusal becomes.
 *
 * Whatever the bytes, a body either passes with a request the engine can take (a non-empty prompt of
 * ids in the vocabulary, 1 <= max_tokens, prompt + max_tokens <= max_model_len) or is refused with an
 * ApiError of status 400 or 404 whose error object serialises (its message escaped to valid UTF-8):
 * anything else (another exception, a crash, a sanitizer report, a trap below) is a finding.
 */
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "config/model_config.h"
#include "http/http_server.h"
#include "http/openai_protocol.h"
#include "model/pretrained.h"

namespace {

using namespace servelab;

// The tiny chat fixture, as `servelab serve --model tests/fixtures/tokenizer/qwen2-tiny-chat` serves it.
struct Served {
  Served() : tokenizer(load_tokenizer(kDir)) {
    model.name = "tiny-chat";
    const ModelConfig config = load_config(std::string(kDir) + "/config.json");
    model.vocab_size = config.vocab_size;
    model.max_model_len = config.max_position_embeddings;
    model.tokenizer = &tokenizer;
    model.chat_template = load_chat_template(kDir);
    model.stop_token_ids = load_stop_token_ids(kDir, tokenizer);
  }
  static constexpr const char* kDir = SERVELAB_FIXTURES_DIR "/tokenizer/qwen2-tiny-chat";
  Tokenizer tokenizer;
  ServedModel model;
};

void check_one(const std::string& body, Endpoint endpoint, const ServedModel& model) {
  try {
    const CheckedRequest c = check_request(body, endpoint, model);
    const EngineRequest& e = c.engine;
    if (e.prompt.empty() || e.max_tokens < 1 ||
        static_cast<long>(e.prompt.size()) + e.max_tokens > static_cast<long>(model.max_model_len))
      __builtin_trap();
    for (const std::int32_t id : e.prompt)
      if (id < 0 || id >= model.vocab_size) __builtin_trap();
  } catch (const ApiError& refused) {
    if (refused.status != 400 && refused.status != 404) __builtin_trap();
    // What the server sends: dump() throws on bytes that are not UTF-8 (which once ended the server).
    (void)error_object(refused.status, refused.what(), refused.param).dump();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto served = std::make_unique<Served>();
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (const Endpoint endpoint : {Endpoint::completions, Endpoint::chat_completions})
    check_one(body, endpoint, served->model);
  return 0;
}
