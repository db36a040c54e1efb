// SPDX-License-Identifier: MIT
#include "tokenizer/normalizer.h"

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "core/error.h"
#include "core/utf8.h"

namespace servelab {

Normalizer Normalizer::from_json(const nlohmann::json& json, const std::string& source) {
  if (json.is_null()) return Normalizer();
  const std::string type = json.value("type", "");
  if (type == "NFC") return Normalizer(Form::NFC);
  if (type == "Sequence") {
    // A Sequence of at most one NFC is all that byte-level BPE models use.
    Normalizer result;
    for (const auto& step : json.at("normalizers")) {
      const Normalizer n = from_json(step, source);
      if (n.form() == Form::None) continue;
      check(result.form() == Form::None, source,
            ": normalizer: a Sequence with more than one NFC step is not supported");
      result = n;
    }
    return result;
  }
  fail(source, ": normalizer type '", type, "' is not supported (expected null, NFC or a Sequence of NFC)");
}

namespace {

// Code points that are their own NFC and never compose with a neighbour
// before them (canonical combining class 0 and NFC_Quick_Check = Yes). UAX #15
// calls them stable: text can be normalized piece by piece between them. Only
// the common ranges are listed; anything else is simply handed to utf8proc.
bool nfc_stable(char32_t cp) {
  return cp < 0x300 || (cp >= 0xAC00 && cp <= 0xD7A3)  // Latin to Latin Extended-B; Hangul syllables
         || (cp >= 0x4E00 && cp <= 0x9FFF)             // CJK unified ideographs
         || (cp >= 0x1F300 && cp <= 0x1FAFF);          // emoji
}

// NFC of a stretch of text, in O(n log n) for any input. utf8proc_map() does
// the same three steps, but puts combining marks into canonical order with a
// bubble sort, which is quadratic on a long run of marks of alternating
// classes (160 KB of them took 33 s). The steps here are utf8proc's own, with
// the ordering done by std::stable_sort:
//   1. decompose each code point (canonical decomposition, Hangul included);
//   2. canonical ordering: sort each run of non-starters (combining class > 0)
//      by class, keeping equal classes in text order (UAX #15, D108);
//   3. compose and re-encode as UTF-8 (utf8proc_reencode, one linear pass).
void append_nfc(std::string& out, std::string_view piece) {
  constexpr auto kOptions = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  thread_local std::vector<utf8proc_int32_t> code_points;  // decomposed text, then its UTF-8 in place
  code_points.clear();
  for (std::size_t pos = 0; pos < piece.size();) {
    utf8proc_int32_t buffer[32];  // the longest canonical decomposition is 4 code points
    const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(next_code_point(piece, pos)), buffer, 32,
                                           kOptions, nullptr);
    check(n >= 0 && n <= 32, "NFC normalization failed: ", n < 0 ? utf8proc_errmsg(n) : "decomposition too long");
    code_points.insert(code_points.end(), buffer, buffer + n);
  }
  const auto combining_class = [](utf8proc_int32_t cp) { return utf8proc_get_property(cp)->combining_class; };
  for (std::size_t i = 0; i < code_points.size();) {
    std::size_t end = i;
    while (end < code_points.size() && combining_class(code_points[end]) != 0) ++end;
    if (end - i > 1)
      std::stable_sort(code_points.begin() + static_cast<std::ptrdiff_t>(i),
                       code_points.begin() + static_cast<std::ptrdiff_t>(end),
                       [&](utf8proc_int32_t a, utf8proc_int32_t b) { return combining_class(a) < combining_class(b); });
    i = end + 1;
  }
  // utf8proc_reencode writes UTF-8 (at most 4 bytes a code point) plus a NUL over the same buffer.
  const auto length = static_cast<utf8proc_ssize_t>(code_points.size());
  code_points.push_back(0);
  const auto n = utf8proc_reencode(code_points.data(), length, kOptions);
  check(n >= 0, "NFC normalization failed: ", utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(code_points.data()), static_cast<std::size_t>(n));
}

}  // namespace

std::string Normalizer::apply(std::string_view text) const {
  if (form_ == Form::None) return std::string(text);
  // Most text is already NFC: copy runs of stable code points, and run utf8proc
  // only over a stretch that holds something else, from the stable code point
  // before it (which may compose with what follows) to the next stable one.
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0, boundary = 0, pos = 0;
  while (pos < text.size()) {
    const std::size_t start = pos;
    if (nfc_stable(next_code_point(text, pos))) {
      boundary = start;
      continue;
    }
    while (pos < text.size()) {
      std::size_t next = pos;
      if (nfc_stable(next_code_point(text, next))) break;
      pos = next;
    }
    out.append(text.substr(copied, boundary - copied));
    append_nfc(out, text.substr(boundary, pos - boundary));
    copied = boundary = pos;
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace servelab
