// SPDX-License-Identifier: MIT
// Chat templates executed by servelab's Jinja interpreter against
// transformers' apply_chat_template on the same templates: real templates
// from llama.cpp's test set and the fixture tokenizers' (made by
// tools/make_chat_template_fixtures.py), each rendered byte for byte or
// refused by name.
#include <ctime>
#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "model/pretrained.h"
#include "tokenizer_fixtures.h"

using namespace servelab;
using namespace servelab::test;

namespace {

std::filesystem::path chat_fixtures() { return fixtures_dir() / "chat_templates"; }

const nlohmann::ordered_json& renders() {
  static const nlohmann::ordered_json r = [] {
    std::ifstream in(chat_fixtures() / "renders.json");
    REQUIRE(in.good());
    return nlohmann::ordered_json::parse(in);
  }();
  return r;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The generator fixed strftime_now() at 2026-01-15 12:00:00 local time.
std::time_t fixture_now() {
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 15;
  t.tm_hour = 12;
  t.tm_isdst = -1;
  return std::mktime(&t);
}

ChatTemplate::SpecialTokens fixture_tokens() {
  ChatTemplate::SpecialTokens tokens;
  for (const auto& [k, v] : renders()["special_tokens"].items()) tokens.emplace_back(k, v.get<std::string>());
  return tokens;
}

// The templates servelab refuses, each with the construct its refusal names. A
// template that starts rendering or stops rendering changes this list, and the test fails.
const std::map<std::string, std::string> kRefused = {
    {"ByteDance-Seed-OSS", "dict keys other than strings are not supported"},
};

}  // namespace

TEST_CASE("real chat templates render exactly as transformers' apply_chat_template, or are refused by name",
          "[tokenizer][chat][golden]") {
  std::map<std::string, std::string> refused;  // template -> the error naming what is not supported
  int exact = 0, renders_checked = 0;
  for (const auto& [name, cases] : renders()["templates"].items()) {
    INFO("template: " << name);
    const std::string source = read_file(chat_fixtures() / "templates" / (name + ".jinja"));
    std::optional<ChatTemplate> chat;
    try {
      chat.emplace(source, fixture_tokens(), name + ".jinja");
    } catch (const Error& e) {
      refused[name] = e.what();
      continue;
    }
    chat->set_clock(fixture_now);
    bool all_exact = true;
    for (const auto& c : cases) {
      const auto& conversation = renders()["conversations"][c["conversation"].get<std::string>()];
      ChatInputs inputs;
      inputs.messages = conversation["messages"];
      inputs.tools = conversation["tools"];
      inputs.add_generation_prompt = c["add_generation_prompt"];
      INFO("conversation: " << c["conversation"] << ", add_generation_prompt " << inputs.add_generation_prompt);
      ++renders_checked;
      if (c.contains("error")) {  // jinja2 failed (raise_exception, an undefined value): servelab fails too
        INFO("jinja2: " << c["error"]);
        CHECK_THROWS_AS(chat->render(inputs), Error);
        continue;
      }
      try {
        const std::string text = chat->render(inputs);
        CHECK(text == c["text"].get<std::string>());
        all_exact = all_exact && text == c["text"].get<std::string>();
      } catch (const Error& e) {
        // Refusing at render time is allowed only as a refusal by name.
        const std::string what = e.what();
        INFO("servelab: " << what);
        CHECK(what.find("not supported") != std::string::npos);
        refused[name] = what;
        all_exact = false;
        break;
      }
    }
    if (all_exact) ++exact;
  }
  const int templates = static_cast<int>(renders()["templates"].size());
  WARN(exact << " of " << templates << " templates render every conversation exactly (" << renders_checked
             << " renders checked); " << refused.size() << " refused");
  for (const auto& [name, why] : refused) {
    INFO("refused: " << name << ": " << why);
    CHECK(kRefused.count(name) == 1);
    if (kRefused.count(name)) CHECK(why.find(kRefused.at(name)) != std::string::npos);
  }
  for (const auto& [name, construct] : kRefused) {
    INFO("expected to be refused: " << name << " (" << construct << ")");
    CHECK(refused.count(name) == 1);
  }
  CHECK(exact + static_cast<int>(refused.size()) == templates);
}

TEST_CASE("the fixture tokenizers' chat templates tokenize as transformers' apply_chat_template(tokenize=True)",
          "[tokenizer][chat][golden]") {
  for (const std::string name : {"qwen2-style", "llama3-style"}) {
    DYNAMIC_SECTION(name) {
      const auto dir = tokenizer_fixtures() / name;
      const ChatTemplate chat = load_chat_template(dir);
      const Tokenizer tok = load_tokenizer(dir);
      for (const auto& conversation : tokenizer_reference()[name]["chat"]) {
        INFO("conversation: " << conversation["messages"].dump());
        std::vector<ChatMessage> messages;
        for (const auto& m : conversation["messages"]) messages.push_back({m["role"], m["content"]});
        const std::string text = chat.render(messages, conversation["add_generation_prompt"]);
        CHECK(text == conversation["text"].get<std::string>());
        // apply_chat_template(tokenize=True) encodes without adding special tokens: the template has them.
        CHECK(tok.encode(text, false) == conversation["ids"].get<std::vector<std::int32_t>>());
      }
    }
  }
}

TEST_CASE("a default system prompt comes from running the template, newline and all", "[tokenizer][chat]") {
  // SmolLM2's template writes its default system prompt with a real newline after
  // "system"; executing the template keeps it, where recognising the text could not.
  const ChatTemplate chat(
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM<|im_end|>\n' }}{% endif %}"
      "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
      {}, "smollm2");
  const std::vector<ChatMessage> hi = {{"user", "hi"}};
  CHECK(chat.render(hi, true) ==
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("whitespace control follows transformers' trim_blocks and lstrip_blocks", "[tokenizer][chat]") {
  const std::vector<ChatMessage> two = {{"user", "a"}, {"assistant", "b"}};
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it;
  // `-` strips all whitespace on its side; `+` keeps it; one final newline of the source is dropped.
  const ChatTemplate chat(
      "{% for m in messages %}\n    {% if m.role == 'user' %}\n[{{ m.content }}]\n    {%- else %}\n"
      "({{ m.content }}) {{- '!' }}\n    {%+ endif %}\n{% endfor %}\n",
      {}, "ws");
  CHECK(chat.render(two, false) == "[a](b)!\n    ");
  const ChatTemplate comment("a  {# note #}\nb {#- x -#}  c", {}, "comment");
  CHECK(comment.render(two, false) == "a  bc");
}

TEST_CASE("loops, namespaces, macros and Python's values behave as in jinja2", "[tokenizer][chat]") {
  const std::vector<ChatMessage> conv = {{"system", "S"}, {"user", "u1"}, {"assistant", "a1"}, {"user", "u2"}};
  const auto render = [&](std::string_view source) { return ChatTemplate(source, {}, "t").render(conv, false); };
  // A `set` inside a loop is gone at the next iteration; a namespace carries it.
  CHECK(render("{% set x = 0 %}{% for m in messages %}{% set x = loop.index %}{% endfor %}{{ x }}") == "0");
  CHECK(render("{% set ns = namespace(n=0) %}{% for m in messages if m.role == 'user' %}{% set ns.n = ns.n + "
               "loop.length %}{% endfor %}{{ ns.n }}") == "4");
  CHECK(render("{% for m in messages %}{{ loop.index0 }}{{ '|' if not loop.last }}{% endfor %}") == "0|1|2|3");
  CHECK(render("{% macro tag(r, c='?') %}<{{ r|upper }}:{{ c }}>{% endmacro %}{{ tag('a') }}{{ tag('b', c=1) }}") ==
        "<A:?><B:1>");
  CHECK(render("{{ none }} {{ [1, 'a', none, true, 1.5] }} {{ 7 / 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 1e20 }}") ==
        "None [1, 'a', None, True, 1.5] 3.5 -4 2 1e+20");
  // A float literal past double's range is inf or 0, as Python's float() makes it (the fuzzer found it thrown).
  CHECK(render("{{ 1e400 }} {{ -1e400 }} {{ 1e-400 }}") == "inf -inf 0.0");
  CHECK(render("{{ 1 ~ 2 + 3 if false else messages[1:3] | map(attribute='role') | join(',') }}") == "user,assistant");
  CHECK(render("{{ {'b': [1, 2.0, none], 'a': 'é\"'} | tojson }}") == R"({"b": [1, 2.0, null], "a": "é\""})");
  CHECK(render("{{ messages | selectattr('role', 'equalto', 'user') | list | length }}{{ 'x' is string }}"
               "{{ undefined_thing is defined }}{{ messages[0].content is none }}") == "2TrueFalseFalse");
  // A generator filter is truthy even when empty, and yields nothing the second time, as in Python.
  CHECK(render("{% set g = messages | selectattr('role', 'equalto', 'tool') %}{{ 'yes' if g }}"
               "{% set u = messages | selectattr('role', 'equalto', 'user') %}{{ u | list | length }}"
               "{{ u | list | length }}") == "yes20");
  // `|safe` makes a Markup, and Markup + str HTML-escapes the str (functionary's template relies on it); ~ does not.
  CHECK(render("{{ '<b>'|safe + '<i>' }}|{{ 'x' ~ '<'|safe }}") == "<b>&lt;i&gt;|x<");
}

TEST_CASE("constructs the interpreter lacks are refused by name and line, never rendered differently",
          "[tokenizer][chat][bad-input]") {
  REQUIRE_ERROR_MENTIONS(ChatTemplate("a\n{{ x | wordwrap(5) }}", {}, "cfg.json"), "cfg.json", "line 2",
                         "filter 'wordwrap'", "not supported");
  REQUIRE_ERROR_MENTIONS(ChatTemplate("{% include 'x' %}", {}, "cfg.json"), "line 1", "'{% include %}'",
                         "not supported");
  REQUIRE_ERROR_MENTIONS(ChatTemplate("{% if x is escaped %}{% endif %}", {}, "cfg.json"), "test 'escaped'");
  // A filter jinja2 lacks too fails only where it is reached, as in jinja2.
  const ChatTemplate lazy("{% if false %}{{ x | from_json }}{% endif %}{{ 'ok' }}", {}, "t");
  const std::vector<ChatMessage> one = {{"user", "u"}};
  CHECK(lazy.render(one, false) == "ok");
  REQUIRE_ERROR_MENTIONS(ChatTemplate("{{ x | from_json }}", {}, "t").render(one, false), "filter 'from_json'");
  REQUIRE_ERROR_MENTIONS(ChatTemplate("{% for x in y recursive %}{% endfor %}", {}, "t"), "recursive");
  REQUIRE_ERROR_MENTIONS(ChatTemplate("{% if x %}", {}, "t"), "'{% if %}' (line 1) without '{% endif %}'");
  const std::vector<ChatMessage> hi = {{"user", "Grüße"}};
  REQUIRE_ERROR_MENTIONS(ChatTemplate("{{ messages[0].content.zfill(3) }}", {}, "t").render(hi, false), "line 1",
                         "str.zfill()", "not supported");
  // Python's Unicode case mapping is not implemented: non-ASCII text is refused, not mis-cased.
  REQUIRE_ERROR_MENTIONS(ChatTemplate("{{ messages[0].content | upper }}", {}, "t").render(hi, false),
                         "upper() of non-ASCII text is not supported");
  REQUIRE_ERROR_MENTIONS(ChatTemplate("{{ raise_exception('Roles must alternate') }}", {}, "t").render(hi, false),
                         "Roles must alternate");
  REQUIRE_ERROR_MENTIONS(ChatTemplate("{{ x.y }}", {}, "t").render(hi, false), "undefined");
}

TEST_CASE("a render is bounded in output, loop iterations and call depth", "[tokenizer][chat][bad-input]") {
  const std::vector<ChatMessage> hi = {{"user", "hi"}};
  ChatTemplate loops("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", {}, "t");
  loops.set_limits({.max_output_bytes = 1 << 20, .max_loop_iterations = 10'000, .max_call_depth = 8});
  REQUIRE_ERROR_MENTIONS(loops.render(hi, false), "loop iterations", "limit");
  ChatTemplate big("{% for i in range(100) %}{{ 'x' * 100 }}{% endfor %}", {}, "t");
  big.set_limits({.max_output_bytes = 5000, .max_loop_iterations = 10'000, .max_call_depth = 8});
  REQUIRE_ERROR_MENTIONS(big.render(hi, false), "5000 bytes", "output limit");
  ChatTemplate deep("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {}, "t");
  REQUIRE_ERROR_MENTIONS(deep.render(hi, false), "call depth limit");
  REQUIRE_ERROR_MENTIONS(ChatTemplate("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}", {}, "t"),
                         "nested deeper");
}

TEST_CASE("bad messages and a folder without a template say which", "[tokenizer][chat][bad-input]") {
  const ChatTemplate chat("{% for m in messages %}{{ m.content }}{% endfor %}", {}, "t");
  const std::vector<ChatMessage> bad_utf8 = {{"user", "\xff"}};
  REQUIRE_ERROR_MENTIONS(chat.render({}, true), "no messages");
  REQUIRE_ERROR_MENTIONS(chat.render(bad_utf8, true), "chat message (user)", "invalid UTF-8");
  const auto dir = tokenizer_fixtures() / "gpt2-style";
  REQUIRE_ERROR_MENTIONS(load_chat_template(dir), dir.string(), "no chat template");
}
