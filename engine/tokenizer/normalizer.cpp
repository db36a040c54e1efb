#include "tokenizer/normalizer.h"

#include <cstdlib>
#include <memory>

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "core/error.h"
#include "tokenizer/utf8.h"

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
      check(result.form() == Form::None, source, ": normalizer: a Sequence with more than one NFC step is not supported");
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
         || (cp >= 0x4E00 && cp <= 0x9FFF)            // CJK unified ideographs
         || (cp >= 0x1F300 && cp <= 0x1FAFF);         // emoji
}

void append_nfc(std::string& out, std::string_view piece) {
  utf8proc_uint8_t* result = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(piece.data()),
                              static_cast<utf8proc_ssize_t>(piece.size()), &result,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  check(n >= 0, "NFC normalization failed: ", utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(result, &std::free);
  out.append(reinterpret_cast<const char*>(result), static_cast<std::size_t>(n));
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
