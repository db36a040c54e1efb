// SPDX-License-Identifier: MIT
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace servelab {

const char* const kGpt2SplitPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// One compiled pattern. PCRE2 code is read-only after compilation, so one
// Regex serves every thread; the match data is per thread.
class PreTokenizer::Regex {
 public:
  Regex(const std::string& pattern, const std::string& source) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                          &offset, nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      fail(source, ": pre_tokenizer: split regex does not compile with PCRE2 at offset ", offset, ": ",
           reinterpret_cast<const char*>(message), " (pattern: ", pattern, ")");
    }
    // Without the JIT (a build without it, or an exotic CPU) the interpreter gives the same matches, slower.
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the matches of the regex in text, and the gaps between them, to words.
  void split(std::string_view text, std::vector<std::string_view>& words) const {
    // One ovector pair is enough: only the whole match is used, and a
    // too-small ovector still reports it (return value 0).
    thread_local std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
        pcre2_match_data_create(1, nullptr), &pcre2_match_data_free);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::size_t offset = 0, last = 0;
    while (offset <= text.size()) {
      // The text was validated once by the tokenizer; PCRE2's own check would
      // rescan the whole subject on every call and make splitting quadratic.
      const int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), offset, 0, data.get(), nullptr)
                          : pcre2_match(code_, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        fail("pre-tokenizer regex failed at byte ", offset, ": ", reinterpret_cast<const char*>(message));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
      const std::size_t start = ov[0], end = ov[1];
      if (start > last) words.push_back(text.substr(last, start - last));
      if (end > start) {
        words.push_back(text.substr(start, end - start));
        offset = last = end;
      } else {
        // An empty match is no word; step over one whole character and search on.
        offset = end + 1;
        while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) ++offset;
        last = start;
      }
    }
    if (last < text.size()) words.push_back(text.substr(last));
  }

 private:
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

namespace {

// A literal split string as a PCRE2 pattern.
std::string escape_literal(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-#/ ").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns, bool add_prefix_space, const std::string& source)
    : add_prefix_space_(add_prefix_space) {
  for (const auto& p : patterns) regexes_.push_back(std::make_unique<Regex>(p, source));
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

PreTokenizer PreTokenizer::from_json(const nlohmann::json& json, const std::string& source) {
  const std::string where = source + ": pre_tokenizer";
  check(json.is_object(), where, " is missing; servelab supports byte-level BPE only (expected ByteLevel)");
  std::vector<nlohmann::json> steps;
  if (json.value("type", "") == "Sequence") {
    for (const auto& step : json.at("pretokenizers")) steps.push_back(step);
  } else {
    steps.push_back(json);
  }
  std::vector<std::string> patterns;
  bool add_prefix_space = false, byte_level = false;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& step = steps[i];
    const std::string type = step.value("type", "");
    check(!byte_level, where, ": step ", i, " (", type, ") comes after ByteLevel; expected ByteLevel last");
    if (type == "Split") {
      const std::string behavior = step.value("behavior", "");
      check(behavior == "Isolated", where, ": Split behavior '", behavior, "' is not supported (expected Isolated)");
      check(!step.value("invert", false), where, ": Split with invert: true is not supported");
      const auto& pattern = step.at("pattern");
      if (pattern.contains("Regex"))
        patterns.push_back(pattern.at("Regex").get<std::string>());
      else if (pattern.contains("String"))
        patterns.push_back(escape_literal(pattern.at("String").get<std::string>()));
      else
        fail(where, ": Split pattern must be {\"Regex\": ...} or {\"String\": ...}");
    } else if (type == "ByteLevel") {
      byte_level = true;
      add_prefix_space = step.value("add_prefix_space", true);
      // A prefix space added after a split would go in front of every word, not just the text.
      check(!add_prefix_space || patterns.empty(), where,
            ": ByteLevel with add_prefix_space after a Split is not supported");
      if (step.value("use_regex", true)) patterns.emplace_back(kGpt2SplitPattern);
    } else {
      fail(where, ": type '", type, "' is not supported (expected ByteLevel, or a Sequence of Split and ByteLevel)");
    }
  }
  check(byte_level, where, " has no ByteLevel step; servelab supports byte-level BPE only");
  return PreTokenizer(patterns, add_prefix_space, source);
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
  if (regexes_.empty()) {
    if (!text.empty()) words.push_back(text);
    return;
  }
  const std::size_t first = words.size();
  regexes_[0]->split(text, words);
  // Each further regex splits every word the previous ones made.
  for (std::size_t r = 1; r < regexes_.size(); ++r) {
    std::vector<std::string_view> pieces(words.begin() + static_cast<std::ptrdiff_t>(first), words.end());
    words.resize(first);
    for (auto piece : pieces) regexes_[r]->split(piece, words);
  }
}

}  // namespace servelab
