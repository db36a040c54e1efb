// SPDX-License-Identifier: MIT
#include "http/openai_protocol.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/json.h"
#include "core/utf8.h"
#include "workload/text.h"

namespace servelab {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

// Each reader: absent (or null, as the openai package sends for unset fields) leaves the default.
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

bool read_bool(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) bad(name, std::string("'") + name + "' must be a boolean, got " + json_brief(*v));
  return v->get<bool>();
}

// The engine samples in float, so the range is checked on the float the engine will see:
// top_p 1e-300 is a positive double but float 0, which the sampler would refuse.
float read_number(const json& body, const char* name, float fallback, float lo, float hi, bool lo_open) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) bad(name, std::string("'") + name + "' must be a number, got " + json_brief(*v));
  const double wide = v->get<double>();
  const float x = std::isfinite(wide) && std::abs(wide) <= std::numeric_limits<float>::max()
                      ? static_cast<float>(wide)
                      : std::numeric_limits<float>::infinity();
  if (!std::isfinite(x) || x > hi || (lo_open ? x <= lo : x < lo)) {
    // A value that passes as a double but not as the float the sampler uses says so (1e-300 is 0 as a float).
    const std::string as_float = std::isfinite(x) && static_cast<double>(x) != wide
                                     ? " (" + shortest_text(x) + " as the 32-bit float the engine samples with)"
                                     : "";
    bad(name, std::string("'") + name + "' must be in " + (lo_open ? "(" : "[") + shortest_text(lo) + ", " +
                  shortest_text(hi) + "], got " + json_brief(*v) + as_float);
  }
  return x;
}

template <typename T>
std::optional<T> read_int(const json& body, const char* name, T lo, T hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  try {
    return json_int<T>(*v, lo, hi, std::string("'") + name + "'");
  } catch (const Error& e) {
    bad(name, e.what());
  }
}

std::string read_text(const json& v, const std::string& what) {
  if (!v.is_string()) bad(what, "'" + what + "' must be a string, got " + json_brief(v));
  std::string s = v.get<std::string>();
  try {
    check_utf8(s, "'" + what + "'");
  } catch (const Error& e) {
    bad(what, e.what());
  }
  return s;
}

void read_prompt(const json& body, CompletionRequest& r, int vocab_size) {
  const json* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required (a string, or an array of token ids)");
  if (p->is_string()) {
    r.prompt_text = read_text(*p, "prompt");
    return;
  }
  if (!p->is_array() || p->empty())
    bad("prompt", "'prompt' must be a string or a non-empty array of token ids, got " + json_brief(*p));
  // ["text"] is one prompt as a string; more than one prompt is a batch, which n = 1 serving does not take.
  if ((*p)[0].is_string()) {
    if (p->size() != 1) bad("prompt", "'prompt' holds " + std::to_string(p->size()) + " prompts; send one per request");
    r.prompt_text = read_text((*p)[0], "prompt[0]");
    return;
  }
  for (std::size_t i = 0; i < p->size(); ++i) {
    const std::string what = "'prompt[" + std::to_string(i) + "]'";
    try {
      r.prompt_ids.push_back(json_int<std::int32_t>((*p)[i], 0, vocab_size - 1, what));
    } catch (const Error& e) {
      bad("prompt", std::string(e.what()) + " (a token id of this model's vocabulary)");
    }
  }
}

void read_messages(const json& body, CompletionRequest& r) {
  const json* m = field(body, "messages");
  if (!m) bad("messages", "'messages' is required (an array of {role, content})");
  if (!m->is_array() || m->empty()) bad("messages", "'messages' must be a non-empty array, got " + json_brief(*m));
  for (std::size_t i = 0; i < m->size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const json& msg = (*m)[i];
    if (!msg.is_object()) bad("messages", "'" + at + "' must be an object, got " + json_brief(msg));
    const auto role = msg.find("role");
    if (role == msg.end()) bad("messages", "'" + at + ".role' is required");
    ChatMessage out{read_text(*role, at + ".role"), {}};
    if (out.role != "system" && out.role != "user" && out.role != "assistant")
      bad("messages", "'" + at + ".role' must be system, user or assistant, got '" + out.role + "'");
    const auto content = msg.find("content");
    if (content == msg.end() || content->is_null()) bad("messages", "'" + at + ".content' is required");
    if (content->is_string()) {
      out.content = read_text(*content, at + ".content");
    } else if (content->is_array()) {
      // The content-parts form: text parts are joined; other kinds (images) need a model servelab does not serve.
      for (std::size_t j = 0; j < content->size(); ++j) {
        const json& part = (*content)[j];
        const std::string p = at + ".content[" + std::to_string(j) + "]";
        if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text"))
          bad("messages", "'" + p + "' must be {\"type\": \"text\", \"text\": ...}, got " + json_brief(part));
        out.content += read_text(part["text"], p + ".text");
      }
    } else {
      bad("messages", "'" + at + ".content' must be a string or an array of text parts, got " + json_brief(*content));
    }
    r.messages.push_back(std::move(out));
  }
}

void read_stop(const json& body, CompletionRequest& r) {
  const json* s = field(body, "stop");
  if (!s) return;
  const json list = s->is_string() ? json::array({*s}) : *s;
  if (!list.is_array()) bad("stop", "'stop' must be a string or an array of strings, got " + json_brief(*s));
  if (list.size() > static_cast<std::size_t>(kMaxStopStrings))
    bad("stop", "'stop' holds " + std::to_string(list.size()) + " strings; at most " + std::to_string(kMaxStopStrings));
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string text = read_text(list[i], "stop[" + std::to_string(i) + "]");
    if (text.empty() || text.size() > kMaxStopBytes)
      bad("stop", "'stop[" + std::to_string(i) + "]' must be 1 to " + std::to_string(kMaxStopBytes) + " bytes long");
    r.stop.push_back(std::move(text));
  }
}

int nesting_depth(const json& v) {
  if (!v.is_structured()) return 0;
  int deepest = 0;
  for (const json& child : v) deepest = std::max(deepest, nesting_depth(child));
  return deepest + 1;
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& body, Endpoint endpoint, int vocab_size) {
  json j;
  try {
    j = parse_json(body, "request body");
  } catch (const Error& e) {
    bad("", e.what());
  }
  // parse_json() bounds the depth at kMaxJsonDepth, so this walk is bounded too; requests need far less.
  if (nesting_depth(j) > kMaxRequestJsonDepth)
    bad("", "request body: JSON nested deeper than " + std::to_string(kMaxRequestJsonDepth) + " levels");
  if (!j.is_object()) bad("", "request body must be a JSON object, got " + json_brief(j));

  CompletionRequest r;
  r.endpoint = endpoint;
  if (const json* m = field(j, "model")) r.model = read_text(*m, "model");
  if (endpoint == Endpoint::completions)
    read_prompt(j, r, vocab_size);
  else
    read_messages(j, r);
  const int int_max = std::numeric_limits<int>::max();
  r.max_tokens = read_int<int>(j, "max_tokens", 1, int_max);
  if (endpoint == Endpoint::chat_completions && !r.max_tokens)
    r.max_tokens = read_int<int>(j, "max_completion_tokens", 1, int_max);
  r.sampling.temperature = read_number(j, "temperature", 1.0f, 0.0f, 1e6f, false);
  r.sampling.top_p = read_number(j, "top_p", 1.0f, 0.0f, 1.0f, true);
  // vLLM takes -1 (and 0) for "no top-k".
  r.sampling.top_k = std::max(0, read_int<int>(j, "top_k", -1, int_max).value_or(0));
  r.sampling.seed = read_int<std::uint64_t>(j, "seed", 0, std::numeric_limits<std::uint64_t>::max()).value_or(0);
  if (read_int<int>(j, "n", 1, int_max).value_or(1) != 1) bad("n", "'n' must be 1 (one choice per request)");
  read_stop(j, r);
  r.stream = read_bool(j, "stream", false);
  r.ignore_eos = read_bool(j, "ignore_eos", false);
  if (const json* so = field(j, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object, got " + json_brief(*so));
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    r.include_usage = read_bool(*so, "include_usage", false);
  }
  return r;
}

namespace {

json header_fields(const ResponseHeader& h, bool chunk) {
  const bool chat = h.endpoint == Endpoint::chat_completions;
  return {{"id", h.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", h.created},
          {"model", h.model}};
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json reason_json(const std::string& reason) { return reason.empty() ? json(nullptr) : json(reason); }

}  // namespace

json response_object(const ResponseHeader& h, const std::string& text, const std::vector<std::int32_t>& token_ids,
                     const std::string& finish_reason, const Usage& usage) {
  json out = header_fields(h, false);
  json choice = {{"index", 0}, {"finish_reason", reason_json(finish_reason)}, {"token_ids", token_ids}};
  if (h.endpoint == Endpoint::chat_completions)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text, choice["logprobs"] = nullptr;
  out["choices"] = json::array({choice});
  out["usage"] = usage_json(usage);
  return out;
}

json chunk_object(const ResponseHeader& h, const std::string& text, const std::vector<std::int32_t>& token_ids,
                  const std::string& finish_reason, bool first) {
  json out = header_fields(h, true);
  json choice = {{"index", 0}, {"finish_reason", reason_json(finish_reason)}, {"token_ids", token_ids}};
  if (h.endpoint == Endpoint::chat_completions) {
    choice["delta"] = {{"content", text}};
    if (first) choice["delta"]["role"] = "assistant";
  } else {
    choice["text"] = text, choice["logprobs"] = nullptr;
  }
  out["choices"] = json::array({choice});
  return out;
}

ChunkFormat::ChunkFormat(const ResponseHeader& header) {
  // One chunk dumped with marks where the text and the ids go. A dumped string value escapes its
  // quotes and backslashes, so the quoted mark and the key can match nowhere else (the model's name
  // included); the keys' order is nlohmann's (sorted), whatever it is.
  const std::string text_mark = json("\x01").dump(), ids_mark = "\"token_ids\":[]";
  const std::string whole = chunk_object(header, "\x01", {}, "", false).dump();
  const std::size_t text_at = whole.find(text_mark), ids_at = whole.find(ids_mark);
  check(text_at != std::string::npos && ids_at != std::string::npos && text_at < ids_at,
        "ChunkFormat: unexpected chunk layout ", whole);
  const std::size_t ids_open = ids_at + ids_mark.size() - 1;  // the empty array's ]
  before_text_ = "data: " + whole.substr(0, text_at);
  before_ids_ = whole.substr(text_at + text_mark.size(), ids_open - (text_at + text_mark.size()));
  after_ids_ = whole.substr(ids_open) + "\n\n";
}

void ChunkFormat::append_event(std::string& out, const std::string& text,
                               std::span<const std::int32_t> token_ids) const {
  out += before_text_;
  out += json(text).dump();
  out += before_ids_;
  for (std::size_t i = 0; i < token_ids.size(); ++i) {
    if (i) out += ',';
    char digits[16];
    const auto end = std::to_chars(digits, digits + sizeof digits, token_ids[i]).ptr;
    out.append(digits, end);
  }
  out += after_ids_;
}

json usage_chunk(const ResponseHeader& h, const Usage& usage) {
  json out = header_fields(h, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return out;
}

json error_object(int status, const std::string& message, const std::string& param) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  // A message quotes what the client sent (a path, a JSON parse error's bytes); dump() throws on invalid UTF-8.
  return {{"error",
           {{"message", to_valid_utf8(message)},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(to_valid_utf8(param))},
            {"code", status}}}};
}

}  // namespace servelab
