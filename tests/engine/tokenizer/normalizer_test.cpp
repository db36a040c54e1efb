// SPDX-License-Identifier: MIT
// NFC by hand-checked cases, including the ones that cross the stable
// code points the normalizer uses to skip text that is already NFC.
#include <cstdlib>
#include <random>

#include <utf8proc.h>

#include "core/error.h"
#include "test_util.h"
#include "tokenizer/normalizer.h"

using namespace servelab;

TEST_CASE("NFC composes, and recomposes across a stable code point", "[tokenizer][normalizer]") {
  const Normalizer nfc(Normalizer::Form::NFC);
  CHECK(nfc.apply("e\u0301") == "\u00e9");
  CHECK(nfc.apply("\u1100\u1161\u11a8") == "\uac01");  // ᄀ + ᅡ + ᆨ -> 각
  CHECK(nfc.apply("\uac00\u11a8") == "\uac01");        // 가 is stable, yet composes with the T jamo after it
  CHECK(nfc.apply("\u212b") == "\u00c5");              // the Angstrom sign is a singleton: it becomes Å
  CHECK(nfc.apply("abc \uac00\u11a8 def e\u0301! \U0001F600") == "abc \uac01 def \u00e9! \U0001F600");
  CHECK(nfc.apply("already NFC: \ud55c\uad6d\uc5b4") == "already NFC: \ud55c\uad6d\uc5b4");
  CHECK(Normalizer().apply("e\u0301") == "e\u0301");
}

TEST_CASE("normalizer fields: null, NFC and Sequence[NFC] are read, others refused by name",
          "[tokenizer][normalizer][bad-input]") {
  using nlohmann::json;
  CHECK(Normalizer::from_json(json(nullptr), "t.json").form() == Normalizer::Form::None);
  CHECK(Normalizer::from_json(json{{"type", "NFC"}}, "t.json").form() == Normalizer::Form::NFC);
  const json sequence = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  CHECK(Normalizer::from_json(sequence, "t.json").form() == Normalizer::Form::NFC);
  REQUIRE_ERROR_MENTIONS(Normalizer::from_json(json{{"type", "Lowercase"}}, "t.json"), "t.json", "'Lowercase'");
}

namespace {

// utf8proc's own NFC of the whole string in one call: the specification the
// normalizer's stable-run skipping and its own canonical ordering must match.
std::string utf8proc_nfc(const std::string& text) {
  utf8proc_uint8_t* result = nullptr;
  const auto n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &result, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  REQUIRE(n >= 0);
  std::string out(reinterpret_cast<const char*>(result), static_cast<std::size_t>(n));
  std::free(result);
  return out;
}

}  // namespace

TEST_CASE("NFC equals utf8proc's one-call NFC on random mixes of marks - jamo and precomposed letters",
          "[tokenizer][normalizer]") {
  // Starters, marks of several combining classes (1, 202, 220, 230, 232),
  // precomposed letters, Hangul jamo and syllables, a singleton, a
  // composition exclusion and a mark that decomposes into two marks.
  const std::vector<std::string> alphabet = {"a",      "e",      "o",      " ",      "\u0301", "\u0316",
                                             "\u0327", "\u0334", "\u031b", "\u0308", "\u035c", "\u00e9",
                                             "\u01d6", "\u1100", "\u1161", "\u11a8", "\uac00", "\u212b",
                                             "\u0958", "\u0344", "\u05b0", "\u0b47", "\u0b3e", "\u4e00"};
  const Normalizer nfc(Normalizer::Form::NFC);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int length = 1 + static_cast<int>(rng() % 24);
    for (int i = 0; i < length; ++i) text += alphabet[rng() % alphabet.size()];
    INFO("trial " << trial);
    REQUIRE(nfc.apply(text) == utf8proc_nfc(text));
  }
}

// Marks of classes 230 and 220 alternating: canonical order moves every 220
// before every 230, which utf8proc_map's bubble sort does in n^2/4 swaps (33 s
// for 160 KB, about 50 s for this 320 KB). The result's form is known, so the check does not depend on
// speed; ctest runs this with a timeout (tests/engine/CMakeLists.txt), which
// the quadratic ordering exceeds many times over.
TEST_CASE("NFC of a 320 KB run of alternating combining marks", "[.][tokenizer][normalizer][nfc-cost]") {
  constexpr int kPairs = 80000;  // 4 bytes a pair: 320 KB
  std::string text = "a";
  for (int i = 0; i < kPairs; ++i) text += "\u0301\u0316";  // acute (230), grave below (220)
  std::string expected = "\u00e1";  // a + the first acute: the grave accents below do not block it
  for (int i = 0; i < kPairs; ++i) expected += "\u0316";
  for (int i = 1; i < kPairs; ++i) expected += "\u0301";
  CHECK(Normalizer(Normalizer::Form::NFC).apply(text) == expected);
  // The same form as utf8proc's on a short run, so `expected` is the right shape.
  std::string short_text = "a";
  for (int i = 0; i < 50; ++i) short_text += "\u0301\u0316";
  CHECK(Normalizer(Normalizer::Form::NFC).apply(short_text) == utf8proc_nfc(short_text));
}
