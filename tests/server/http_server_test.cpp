// SPDX-License-Identifier: MIT
// The server end to end on loopback, with the tiny chat fixture
// (tests/fixtures/tokenizer/qwen2-tiny-chat): what clients see, what a
// disconnect and a shutdown do to the KV blocks, and a bounded load.
#include <catch2/catch.hpp>

#include <httplib.h>

#include <cctype>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "core/json.h"
#include "serve/generate.h"
#include "loadgen/bench_client.h"
#include "http/http_server.h"
#include "live_server.h"
#include "model/pretrained.h"

using namespace servelab;
using nlohmann::json;

namespace {

// The text, token ids and finish reason of an SSE reply, and whether it ended with [DONE].
struct Streamed {
  std::string text;
  std::vector<std::int32_t> ids;
  std::string finish_reason;
  std::optional<json> usage;
  bool done = false;
};

Streamed parse_sse(const std::string& body, bool chat) {
  Streamed s;
  std::size_t pos = 0, end;
  while ((end = body.find("\n\n", pos)) != std::string::npos) {
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    REQUIRE(event.starts_with("data: "));
    if (event == "data: [DONE]") {
      s.done = true;
      continue;
    }
    const json chunk = json::parse(event.substr(6));
    if (chunk.contains("usage")) s.usage = chunk["usage"];
    if (chunk["choices"].empty()) continue;
    const json& c = chunk["choices"][0];
    s.text += chat ? c["delta"]["content"].get<std::string>() : c["text"].get<std::string>();
    for (const auto& id : c["token_ids"]) s.ids.push_back(id.get<std::int32_t>());
    if (!c["finish_reason"].is_null()) s.finish_reason = c["finish_reason"];
  }
  CHECK(pos == body.size());
  return s;
}

// A streamed completion of 250 tokens (ignore_eos) after @p prompt, for a test to read chunk by chunk
// through its own content_receiver.
httplib::Request streamed_completion(const json& prompt) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = json{{"prompt", prompt}, {"max_tokens", 250}, {"ignore_eos", true}, {"stream", true}}.dump();
  return req;
}

}  // namespace

TEST_CASE("streamed text equals non-streamed text equals generate()", "[server]") {
  // With a stream interval, several tokens' events share a chunk; each is still its own event.
  ServerConfig config;
  config.stream_interval_us = GENERATE(0L, 20000L);
  CAPTURE(config.stream_interval_us);
  LiveServer live(config);
  const std::string prompt = "Prefill and decode";
  const json request = {{"model", "tiny-chat"}, {"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}};

  const auto whole = live.post("/v1/completions", request.dump());
  REQUIRE(whole);
  REQUIRE(whole->status == 200);
  const json w = json::parse(whole->body);
  json streaming = request;
  streaming["stream"] = true;
  streaming["stream_options"] = {{"include_usage", true}};
  const auto stream = live.post("/v1/completions", streaming.dump());
  REQUIRE(stream);
  REQUIRE(stream->status == 200);
  CHECK(stream->get_header_value("Content-Type") == "text/event-stream");
  const Streamed s = parse_sse(stream->body, false);

  // The in-process reference: one request through generate(), as `servelab generate --prompt` runs it.
  GenerateOptions gen;
  gen.max_new_tokens = 12;
  gen.stop_token_ids = load_stop_token_ids(kChatModel, live.tokenizer);
  const std::vector<std::int32_t> prompt_ids = live.tokenizer.encode(prompt, true);
  const GenerateResult ref = generate(*live.model, prompt_ids, gen);

  CHECK(w["choices"][0]["token_ids"].get<std::vector<std::int32_t>>() == ref.output_ids);
  CHECK(s.ids == ref.output_ids);
  CHECK(w["choices"][0]["text"] == live.tokenizer.decode(ref.output_ids, /*skip_special_tokens=*/true));
  CHECK(s.text == w["choices"][0]["text"].get<std::string>());
  CHECK(s.done);
  CHECK(s.finish_reason == w["choices"][0]["finish_reason"]);
  REQUIRE(s.usage);
  CHECK((*s.usage)["completion_tokens"] == ref.output_ids.size());
  CHECK((*s.usage)["prompt_tokens"] == prompt_ids.size());
  CHECK(w["usage"] == *s.usage);
}

TEST_CASE("streamed replies end once each: three in a row on one keep-alive connection", "[server]") {
  // The SSE writer sends the body's last chunk with the last events, and the handler's own is dropped:
  // a missing one would hang the first reply, a doubled one would be read as the next reply's status line.
  LiveServer live;
  httplib::Client client = live.client();
  client.set_keep_alive(true);
  const json request = {{"prompt", "Prefill"}, {"max_tokens", 4}, {"stream", true}, {"ignore_eos", true}};
  for (int i = 0; i < 3; ++i) {
    const auto res = client.Post("/v1/completions", request.dump(), "application/json");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    const Streamed s = parse_sse(res->body, false);
    CHECK(s.done);
    CHECK(s.ids.size() == 4);
  }
}

TEST_CASE("a stop string ends the reply before it, with finish_reason stop, streamed or not", "[server]") {
  LiveServer live;
  const json plain = {{"prompt", json::array({1, 2, 3})}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}};
  const auto full = live.post("/v1/completions", plain.dump());
  REQUIRE(full);
  const std::string text = json::parse(full->body)["choices"][0]["text"];
  // The first ASCII letter or digit after the start of the reply is the stop string.
  std::size_t at = 1;
  while (at < text.size() && !std::isalnum(static_cast<unsigned char>(text[at]))) ++at;
  REQUIRE(at < text.size());
  const std::string stop(1, text[at]);
  const std::string expected = text.substr(0, text.find(stop));
  json with_stop = plain;
  with_stop["stop"] = json::array({stop, "never in the reply"});
  const json whole = json::parse(live.post("/v1/completions", with_stop.dump())->body);
  CHECK(whole["choices"][0]["text"] == expected);
  CHECK(whole["choices"][0]["finish_reason"] == "stop");
  CHECK(whole["usage"]["completion_tokens"] < 40);
  with_stop["stream"] = true;
  const auto stream = live.post("/v1/completions", with_stop.dump());
  REQUIRE(stream);
  const Streamed s = parse_sse(stream->body, false);
  CHECK(s.text == expected);
  CHECK(s.finish_reason == "stop");
  CHECK(s.done);
  CHECK(live.all_blocks_returned());
  // (/metrics counts such a request as "stop" only when the handler's abort reaches the engine
  // before the engine finishes it on its own: stop strings are matched on the handler's text.)
}

TEST_CASE("a chat reply is the chat template's prompt answered, streamed or not", "[server]") {
  LiveServer live;
  const json request = {{"messages", json::array({{{"role", "user"}, {"content", "KV 캐시가 뭐예요?"}}})},
                        {"max_tokens", 16},
                        {"temperature", 0}};
  const auto whole = live.post("/v1/chat/completions", request.dump());
  REQUIRE(whole);
  REQUIRE(whole->status == 200);
  const json w = json::parse(whole->body);
  // The ids `servelab generate --chat` prints for this message (tests/cli: cli.generate_chat).
  CHECK(w["choices"][0]["token_ids"] ==
        json::array({88, 50, 211, 316, 210, 86, 24, 235, 221, 233, 229, 197, 60, 114, 312, 121}));
  CHECK(w["usage"]["prompt_tokens"] == 73);
  json streaming = request;
  streaming["stream"] = true;
  const auto stream = live.post("/v1/chat/completions", streaming.dump());
  REQUIRE(stream);
  const Streamed s = parse_sse(stream->body, true);
  CHECK(s.text == w["choices"][0]["message"]["content"].get<std::string>());
  CHECK(!s.usage);  // not asked for
  CHECK(stream->body.find("\"role\":\"assistant\"") != std::string::npos);
}

TEST_CASE("bad requests get 4xx with an OpenAI error object, and the server keeps serving", "[server]") {
  LiveServer live({.api_key = "", .max_body_bytes = 4096});
  const auto expect = [&](const httplib::Result& r, int status, const std::string& message_part) {
    REQUIRE(r);
    CHECK(r->status == status);
    const json e = json::parse(r->body);
    REQUIRE(e.contains("error"));
    CHECK(e["error"]["code"] == status);
    INFO(e["error"]["message"]);
    CHECK(e["error"]["message"].get<std::string>().find(message_part) != std::string::npos);
  };
  expect(live.post("/v1/completions", "{\"prompt\": "), 400, "not valid JSON");
  expect(live.post("/v1/completions", R"({"prompt": "hi", "max_tokens": 0})"), 400, "'max_tokens'");
  expect(live.post("/v1/completions", R"({"prompt": "hi", "temperature": "warm"})"), 400,
         "'temperature' must be a number");
  expect(live.post("/v1/completions", R"({"prompt": "hi", "model": "gpt-4"})"), 404,
         "The model `gpt-4` does not exist");
  expect(live.post("/v1/completions", R"({"prompt": "hi", "max_tokens": 300})"), 400,
         "maximum context length is 256 tokens");
  std::string long_prompt = "[1";
  for (int i = 0; i < 300; ++i) long_prompt += ",1";
  expect(live.post("/v1/completions", R"({"prompt": )" + long_prompt + "]}"), 400, "maximum context length");
  expect(live.post("/v1/completions", std::string(5000, ' ')), 413, "larger than 4096 bytes");
  expect(live.post("/v1/nothing", "{}"), 404, "no route");
  // Still serving after all of that, and nothing held.
  const auto ok = live.post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})");
  REQUIRE(ok);
  CHECK(ok->status == 200);
  CHECK(live.all_blocks_returned());
}

TEST_CASE("with --api-key, /v1 needs the bearer token and /health does not", "[server]") {
  LiveServer live({.api_key = "sesame"});
  const auto denied = live.post("/v1/completions", R"({"prompt": "hi", "max_tokens": 1})");
  REQUIRE(denied);
  CHECK(denied->status == 401);
  const auto allowed =
      live.post("/v1/completions", R"({"prompt": "hi", "max_tokens": 1})", {{"Authorization", "Bearer sesame"}});
  REQUIRE(allowed);
  CHECK(allowed->status == 200);
  const auto health = live.client().Get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
}

TEST_CASE("/v1/models names the model and /metrics counts in Prometheus text", "[server]") {
  LiveServer live;
  const auto models = live.client().Get("/v1/models");
  REQUIRE(models);
  const json m = json::parse(models->body);
  CHECK(m["data"][0]["id"] == "tiny-chat");
  CHECK(m["data"][0]["max_model_len"] == 256);
  REQUIRE(live.post("/v1/completions", R"({"prompt": [1, 2, 3], "max_tokens": 5, "ignore_eos": true})"));
  const auto metrics = live.client().Get("/metrics");
  REQUIRE(metrics);
  const std::string& text = metrics->body;
  CHECK(text.find("servelab:time_to_first_token_seconds_count 1\n") != std::string::npos);
  CHECK(text.find("servelab:inter_token_latency_seconds_count 4\n") != std::string::npos);
  CHECK(text.find("servelab:generation_tokens_total 5\n") != std::string::npos);
  CHECK(text.find("servelab:request_success_total{finished_reason=\"length\"} 1\n") != std::string::npos);
  CHECK(text.find("servelab:num_requests_running 0\n") != std::string::npos);
  CHECK(text.find("servelab:kv_cache_blocks_used 0\n") != std::string::npos);
}

TEST_CASE("with prefix caching a repeated prompt gets the same tokens and /metrics counts its hit tokens", "[server]") {
  EngineConfig engine_config;
  engine_config.enable_prefix_caching = true;
  LiveServer live({}, engine_config);
  json prompt = json::array();
  for (int t = 1; t <= 40; ++t) prompt.push_back(t);  // blocks of 16: two full blocks, then 8 tokens
  const std::string body = json{{"prompt", prompt}, {"max_tokens", 4}, {"ignore_eos", true}}.dump();
  const auto first = live.post("/v1/completions", body);
  const auto second = live.post("/v1/completions", body);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(json::parse(first->body)["choices"][0]["text"] == json::parse(second->body)["choices"][0]["text"]);
  const auto metrics = live.client().Get("/metrics");
  REQUIRE(metrics);
  // Queries count both prompts' tokens; the second found its two full blocks cached.
  CHECK(metrics->body.find("servelab:prefix_cache_queries_total 80\n") != std::string::npos);
  CHECK(metrics->body.find("servelab:prefix_cache_hits_total 32\n") != std::string::npos);
  CHECK(live.all_blocks_returned());
}

TEST_CASE("a client that hangs up mid-stream has its request aborted and its KV blocks freed", "[server]") {
  // As in the shutdown test below: on a busy machine the tiny model can write all 250 tokens before the
  // hang-up reaches the engine, which then finishes the request as "length". Such an attempt shows nothing
  // about aborts and is retried; a server that never aborts fails every attempt.
  for (int attempt = 1; attempt <= 5; ++attempt) {
    LiveServer live;
    httplib::Client c = live.client();
    httplib::Request req = streamed_completion(json::array({1, 2, 3}));
    int chunks = 0;
    bool saw_blocks_held = false;
    req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
      chunks += static_cast<int>(std::count(data, data + n, '\n')) / 2;
      const EngineLoopStats s = live.loop.stats();
      saw_blocks_held = saw_blocks_held || s.num_free_blocks < s.num_blocks;
      return chunks < 3;  // hang up after three chunks
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    c.send(req, res, error);
    CHECK(error == httplib::Error::Canceled);
    CHECK(saw_blocks_held);
    CHECK(live.all_blocks_returned());
    const auto metrics = live.client().Get("/metrics");
    REQUIRE(metrics);
    const bool finished_first =
        metrics->body.find("servelab:request_success_total{finished_reason=\"length\"} 1\n") != std::string::npos;
    if (finished_first && attempt < 5) continue;
    CHECK(metrics->body.find("servelab:request_success_total{finished_reason=\"abort\"} 1\n") != std::string::npos);
    break;
  }
}

TEST_CASE("shutdown aborts in-flight streams cleanly: they end with finish_reason abort and [DONE]", "[server]") {
  // The tiny model writes 250 tokens in about 10 ms, so on a busy machine a whole stream can end
  // before its first chunk is read. Such an attempt shows nothing about shutdown and is retried;
  // a shutdown that never aborts a stream fails every attempt.
  for (int attempt = 1; attempt <= 5; ++attempt) {
    LiveServer live;
    httplib::Client c = live.client();
    httplib::Request req = streamed_completion(json::array({1, 2}));
    std::string body;
    // Shut down from the thread that reads the first chunk: no second thread to wake first.
    req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
      if (body.empty()) live.loop.shutdown();
      body.append(data, n);
      return true;
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    REQUIRE(c.send(req, res, error));
    const Streamed s = parse_sse(body, false);
    REQUIRE(s.done);
    if (s.finish_reason == "length") {
      WARN("attempt " << attempt << ": all 250 tokens were out before shutdown; trying again");
      continue;
    }
    CHECK(s.finish_reason == "abort");
    CHECK(s.ids.size() < 250);
    const EngineLoopStats st = live.loop.stats();
    CHECK(st.num_requests == 0);
    CHECK(st.num_free_blocks == st.num_blocks);
    // After shutdown a new request is refused with 503, not hung.
    const auto late = live.post("/v1/completions", R"({"prompt": "hi", "max_tokens": 1})");
    REQUIRE(late);
    CHECK(late->status == 503);
    return;
  }
  FAIL("in 5 attempts no stream was still running when shutdown came");
}

TEST_CASE("a bounded load with random hang-ups finishes every request and returns every block", "[server]") {
  // 200 requests, 32 at a time, a fifth of them hanging up after 1-4 tokens; a KV cache
  // small enough (64 blocks) that some requests are preempted on the way.
  EngineConfig engine_config;
  engine_config.scheduler.max_num_seqs = 32;
  engine_config.kv_cache_memory = 64 * 16 * kv_cache_bytes_for(load_chat_model()->config(), 1, 1);
  LiveServer live({}, engine_config);
  WorkloadSpec spec;
  spec.num_requests = 200;
  spec.prompt_len = LengthDist::uniform(4, 48);
  spec.output_len = LengthDist::uniform(4, 32);
  spec.seed = 7;
  const std::vector<WorkloadRequest> workload = make_workload(spec, live.model->config().vocab_size);
  BenchConfig bench;
  bench.port = live.port;
  bench.model = "tiny-chat";
  bench.max_concurrency = 32;
  bench.ignore_eos = true;
  bench.disconnect_fraction = 0.2;
  bench.seed = 3;
  bench.timeout_s = 30;
  const BenchResult result = run_bench(workload, bench);
  int completed = 0, hung_up = 0;
  for (std::size_t i = 0; i < result.requests.size(); ++i) {
    const BenchRequestResult& r = result.requests[i];
    INFO("request " << i << ": " << r.error << " sent at " << r.times.first_scheduled << " tokens "
                    << r.times.token_times.size());
    CHECK((r.success || r.disconnected));
    if (r.success) CHECK(r.output_tokens == workload[i].max_tokens);
    completed += r.success;
    hung_up += r.disconnected;
  }
  CHECK(completed + hung_up == 200);
  CHECK(hung_up > 20);
  CHECK(live.all_blocks_returned());
  // The vLLM-style block reports the same counts.
  const std::string block = format_bench_result(result, bench, {});
  CHECK(block.find("Successful requests:                     " + std::to_string(completed)) != std::string::npos);
  const json j = bench_result_json(result, bench, {});
  CHECK(j["completed"] == completed);
  CHECK(j["ttfts"].size() == 200);
}

TEST_CASE("bench serve reads the server's CPU time from /metrics and prints each side's CPU per output token",
          "[server]") {
  LiveServer live;
  BenchConfig bench;
  bench.port = live.port;
  bench.model = "tiny-chat";
  bench.ignore_eos = true;
  const double before = server_cpu_seconds(bench);
  CHECK(before > 0);  // loading the model took CPU
  WorkloadSpec spec;
  spec.num_requests = 8;
  spec.prompt_len = LengthDist::fixed(16);
  spec.output_len = LengthDist::fixed(16);
  const BenchResult result = run_bench(make_workload(spec, live.model->config().vocab_size), bench);
  const double after = server_cpu_seconds(bench);
  CHECK(after > before);

  BenchLabels labels;
  labels.server_cpu_seconds = 0.0128;  // 128 output tokens: 100 us each
  labels.client_cpu_seconds = 0.00064;
  const std::string block = format_bench_result(result, bench, labels);
  CHECK(block.find("Server CPU per output token (us):        100.0 ") != std::string::npos);
  CHECK(block.find("Client CPU per output token (us):        5.0 ") != std::string::npos);
  CHECK(block.find("In-process CPU") == std::string::npos);  // not measured: no line
  const json j = bench_result_json(result, bench, labels);
  CHECK(j["server_cpu_us_per_output_token"].get<double>() == Approx(100.0));
  CHECK(!j.contains("in_process_cpu_us_per_output_token"));
  CHECK(format_bench_result(result, bench, {}).find("CPU per output token") == std::string::npos);

  bench.port = 1;  // nothing listens there
  CHECK(server_cpu_seconds(bench) < 0);
}

TEST_CASE("a /metrics body that is not a CPU count is refused, never read as one", "[server]") {
  // A stand-in server whose /metrics says what each case needs.
  httplib::Server fake;
  std::string body;
  fake.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) { res.set_content(body, "text/plain"); });
  const int port = fake.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { fake.listen_after_bind(); });
  BenchConfig bench;
  bench.port = port;
  body = "# HELP x\nprocess_cpu_seconds_total 12.5\n";
  CHECK(server_cpu_seconds(bench) == 12.5);
  for (const char* bad : {"process_cpu_seconds_total nan\n", "process_cpu_seconds_total inf\n",
                          "process_cpu_seconds_total -3\n", "process_cpu_seconds_total 1e999\n",
                          "process_cpu_seconds_total 12.5s\n", "process_cpu_seconds_total\n", "other_metric 1\n"}) {
    body = bad;
    INFO(bad);
    CHECK(server_cpu_seconds(bench) < 0);
  }
  body = std::string(5u << 20, '#') + "\nprocess_cpu_seconds_total 1\n";  // past the 4 MiB the client reads
  CHECK(server_cpu_seconds(bench) < 0);
  fake.stop();
  serving.join();
}
