// SPDX-License-Identifier: MIT
// The server's parts that need no socket: request parsing and its 4xx
// messages, stream chunks serialized once per reply, stop strings over a
// streamed reply, Prometheus rendering.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <unistd.h>

#include <string>
#include <vector>

#include "http/openai_protocol.h"
#include "http/prometheus.h"
#include "http/text_stream.h"
#include "model/pretrained.h"

using namespace servelab;

namespace {

// The status and field of the ApiError that parsing @p body throws; status 0 when it parses.
std::pair<int, std::string> refusal(const std::string& body, Endpoint endpoint = Endpoint::completions) {
  try {
    parse_completion_request(body, endpoint, 100);
  } catch (const ApiError& e) {
    return {e.status, e.param};
  }
  return {0, ""};
}

}  // namespace

TEST_CASE("a completion request reads every field OpenAI and vLLM define", "[server]") {
  const CompletionRequest r = parse_completion_request(
      R"({"model": "m", "prompt": [1, 2, 99], "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": -1,
          "seed": 42, "stop": "\n", "n": 1, "stream": true, "stream_options": {"include_usage": true},
          "ignore_eos": true, "user": "ignored"})",
      Endpoint::completions, 100);
  CHECK(r.model == "m");
  CHECK(r.prompt_ids == std::vector<std::int32_t>{1, 2, 99});
  CHECK(!r.prompt_text);
  CHECK(r.max_tokens == 7);
  CHECK(r.sampling.temperature == 0.5f);
  CHECK(r.sampling.top_p == 0.9f);
  CHECK(r.sampling.top_k == 0);  // -1 is vLLM's "all"
  CHECK(r.sampling.seed == 42);
  CHECK(r.stop == std::vector<std::string>{"\n"});
  CHECK(r.stream);
  CHECK(r.include_usage);
  CHECK(r.ignore_eos);
}

TEST_CASE("unset fields take OpenAI's defaults, and null counts as unset", "[server]") {
  const CompletionRequest r =
      parse_completion_request(R"({"prompt": "hi", "temperature": null, "stop": null})", Endpoint::completions, 100);
  CHECK(r.prompt_text == "hi");
  CHECK(!r.max_tokens);
  CHECK(r.sampling.temperature == 1.0f);
  CHECK(r.stop.empty());
  CHECK(!r.stream);
}

TEST_CASE("a chat request joins text content parts and takes max_completion_tokens", "[server]") {
  const CompletionRequest r = parse_completion_request(
      R"({"messages": [{"role": "system", "content": "be brief"},
                       {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
          "max_completion_tokens": 3})",
      Endpoint::chat_completions, 100);
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[1].role == "user");
  CHECK(r.messages[1].content == "ab");
  CHECK(r.max_tokens == 3);
}

TEST_CASE("every malformed request is a 400 naming the field", "[server]") {
  CHECK(refusal("{bad") == std::pair<int, std::string>{400, ""});
  CHECK(refusal("[1, 2]") == std::pair<int, std::string>{400, ""});
  CHECK(refusal(R"({"max_tokens": 3})") == std::pair<int, std::string>{400, "prompt"});
  CHECK(refusal(R"({"prompt": "x", "max_tokens": 0})") == std::pair<int, std::string>{400, "max_tokens"});
  CHECK(refusal(R"({"prompt": "x", "max_tokens": -5})") == std::pair<int, std::string>{400, "max_tokens"});
  CHECK(refusal(R"({"prompt": "x", "max_tokens": "10"})") == std::pair<int, std::string>{400, "max_tokens"});
  CHECK(refusal(R"({"prompt": "x", "max_tokens": 4294967297})") == std::pair<int, std::string>{400, "max_tokens"});
  CHECK(refusal(R"({"prompt": "x", "temperature": -1})") == std::pair<int, std::string>{400, "temperature"});
  CHECK(refusal(R"({"prompt": "x", "temperature": "hot"})") == std::pair<int, std::string>{400, "temperature"});
  CHECK(refusal(R"({"prompt": "x", "top_p": 0})") == std::pair<int, std::string>{400, "top_p"});
  CHECK(refusal(R"({"prompt": "x", "n": 2})") == std::pair<int, std::string>{400, "n"});
  CHECK(refusal(R"({"prompt": "x", "stream": "yes"})") == std::pair<int, std::string>{400, "stream"});
  CHECK(refusal(R"({"prompt": "x", "stream_options": {"include_usage": true}})") ==
        std::pair<int, std::string>{400, "stream_options"});
  CHECK(refusal(R"({"prompt": "x", "stop": [""]})") == std::pair<int, std::string>{400, "stop"});
  CHECK(refusal(R"({"prompt": "x", "stop": 5})") == std::pair<int, std::string>{400, "stop"});
  CHECK(refusal(R"({"prompt": [1, 100]})") == std::pair<int, std::string>{400, "prompt"});    // outside the vocabulary
  CHECK(refusal(R"({"prompt": ["a", "b"]})") == std::pair<int, std::string>{400, "prompt"});  // a batch
  CHECK(refusal(R"({"prompt": []})") == std::pair<int, std::string>{400, "prompt"});
  CHECK(refusal(R"({"prompt": "\ud800"})") == std::pair<int, std::string>{400, ""});  // not valid JSON text
  CHECK(refusal(R"({"prompt": "x", "model": 3})") == std::pair<int, std::string>{400, "model"});
  CHECK(refusal(R"({"prompt": {"a": [[[[[[[[1]]]]]]]]}})") == std::pair<int, std::string>{400, ""});  // too deep
  CHECK(refusal(R"({"messages": []})", Endpoint::chat_completions) == std::pair<int, std::string>{400, "messages"});
  CHECK(refusal(R"({"messages": [{"role": "tool", "content": "x"}]})", Endpoint::chat_completions) ==
        std::pair<int, std::string>{400, "messages"});
  CHECK(refusal(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                Endpoint::chat_completions) == std::pair<int, std::string>{400, "messages"});
  CHECK(refusal(R"({"messages": [{"role": "user"}]})", Endpoint::chat_completions) ==
        std::pair<int, std::string>{400, "messages"});
}

TEST_CASE("brackets inside a prompt's text are not nesting", "[server]") {
  const CompletionRequest r =
      parse_completion_request(R"({"prompt": "[[[[[[[[[[[[[[[[[[[[{{{{{{{{{{"})", Endpoint::completions, 100);
  CHECK(r.prompt_text->size() == 30);
}

TEST_CASE("response objects carry OpenAI's fields and the error object its shape", "[server]") {
  const ResponseHeader chat{Endpoint::chat_completions, "chatcmpl-1", 5, "m"};
  const auto whole = response_object(chat, "hi", {7, 8}, "length", {3, 2});
  CHECK(whole["object"] == "chat.completion");
  CHECK(whole["choices"][0]["message"]["content"] == "hi");
  CHECK(whole["usage"]["total_tokens"] == 5);
  const auto first = chunk_object(chat, "h", {7}, "", true);
  CHECK(first["object"] == "chat.completion.chunk");
  CHECK(first["choices"][0]["delta"]["role"] == "assistant");
  CHECK(first["choices"][0]["finish_reason"].is_null());
  const auto usage = usage_chunk(chat, {3, 2});
  CHECK(usage["choices"].empty());
  const auto err = error_object(404, "no such model", "model");
  CHECK(err["error"]["type"] == "not_found_error");
  CHECK(err["error"]["code"] == 404);
}

TEST_CASE("a reply's middle chunks pre-serialized are byte for byte the JSON chunk objects", "[server]") {
  // A model name with a quote, a backslash and the mark ChunkFormat splits on; texts that need escaping.
  const std::string model = "m\"x\\ \x01 \"token_ids\":[]";
  const std::vector<std::int32_t> one{7}, three{0, 49151, 2147483647}, none{};
  for (const Endpoint endpoint : {Endpoint::completions, Endpoint::chat_completions}) {
    const ResponseHeader h{endpoint, "id-\x01", 1790000000, model};
    const ChunkFormat format(h);
    for (const std::string text : {"", "plain", "a \"quote\", a \\ and a\nline\ttab", "\x01\x1f control",
                                   "\xea\xb0\x80 \xf0\x9f\x99\x82 utf-8"}) {
      for (const auto& ids : {one, three, none}) {
        std::string got = "kept";
        format.append_event(got, text, ids);
        CHECK(got == "kept" + ("data: " + chunk_object(h, text, ids, "", false).dump() + "\n\n"));
      }
    }
  }
}

TEST_CASE("a stop string is cut out even when it spans tokens, and nothing after it is sent", "[server]") {
  const Tokenizer tok = load_tokenizer(std::string(SERVELAB_FIXTURES_DIR) + "/tokenizer/qwen2-tiny-chat");
  const std::vector<std::int32_t> ids = tok.encode("Hello world, KV cache here", false);
  const std::string full = tok.decode(ids);
  REQUIRE(full == "Hello world, KV cache here");
  // Without stop strings, the pieces add up to decode().
  TextStream plain(&tok, {});
  std::string all;
  for (auto id : ids) all += plain.push(id);
  all += plain.finish();
  CHECK(all == full);
  // "d, K" starts inside one token and ends inside a later one.
  TextStream stream(&tok, {"d, K", "never"});
  std::string sent;
  for (auto id : ids) {
    sent += stream.push(id);
    if (stream.stopped()) break;
    // What has been sent never contains the beginning of the stop string.
    CHECK(sent.find("d, ") == std::string::npos);
  }
  sent += stream.finish();
  CHECK(stream.stopped());
  CHECK(sent == "Hello worl");
}

TEST_CASE("a stop string that never completes is sent in full at the end", "[server]") {
  const Tokenizer tok = load_tokenizer(std::string(SERVELAB_FIXTURES_DIR) + "/tokenizer/qwen2-tiny-chat");
  const std::vector<std::int32_t> ids = tok.encode("cache here", false);
  TextStream stream(&tok, {"here and"});
  std::string sent;
  for (auto id : ids) sent += stream.push(id);
  sent += stream.finish();
  CHECK(!stream.stopped());
  CHECK(sent == "cache here");
}

TEST_CASE("a histogram renders cumulative buckets, sum and count", "[server]") {
  Histogram h({0.1, 1.0});
  h.observe(0.05);  // bucket 0.1
  h.observe(0.5);   // bucket 1.0
  h.observe(3.0);   // +Inf only
  std::string out;
  h.render(out, "x_seconds", "help");
  CHECK(out ==
        "# HELP x_seconds help\n# TYPE x_seconds histogram\n"
        "x_seconds_bucket{le=\"0.10000000000000001\"} 1\nx_seconds_bucket{le=\"1\"} 2\n"
        "x_seconds_bucket{le=\"+Inf\"} 3\nx_seconds_sum 3.5499999999999998\nx_seconds_count 3\n");
}

namespace {

// The value on the line `name value` of a Prometheus text body; fails the test when there is none.
double metric(const std::string& text, const std::string& name) {
  const std::size_t at = text.find("\n" + name + " ");
  REQUIRE(at != std::string::npos);
  return std::strtod(text.c_str() + at + name.size() + 2, nullptr);
}

}  // namespace

TEST_CASE("the process metrics are this process's CPU time and resident memory", "[server]") {
  const auto render = [] {
    std::string out = "\n";
    render_process_metrics(out);
    return out;
  };
  // CPU: user and system time of every thread, the clock C's clock() reads too. Half of the busy time is
  // spent in system calls, so a count of user time alone falls short.
  const auto busy = [](auto&& work) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (std::chrono::steady_clock::now() < until) work();
  };
  volatile double sink = 0;
  busy([&] { sink = sink + 1; });
  busy([] { ::close(-1); });  // a real system call each time (it fails at once: EBADF)
  const double cpu = metric(render(), "process_cpu_seconds_total");
  const double c_clock = static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
  CHECK(cpu >= 0.15);
  CHECK(std::abs(cpu - c_clock) < 0.05);

  // Memory: the resident pages, not the address space. 64 MiB allocated counts only once it is touched.
  const double before = metric(render(), "process_resident_memory_bytes");
  constexpr std::size_t kBytes = 64u << 20;
  char* block = static_cast<char*>(std::malloc(kBytes));  // above malloc's mmap threshold: fresh pages
  REQUIRE(block != nullptr);
  const double allocated = metric(render(), "process_resident_memory_bytes");
  std::memset(block, 1, kBytes);
  const double touched = metric(render(), "process_resident_memory_bytes");
  std::free(block);
  CHECK(before > 1e6);
  CHECK(allocated - before < 0.25 * kBytes);
  CHECK(touched - allocated > 0.9 * kBytes);
}
