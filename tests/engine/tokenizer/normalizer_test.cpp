// NFC by hand-checked cases, including the ones that cross the stable
// code points the normalizer uses to skip text that is already NFC.
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

TEST_CASE("normalizer fields: null, NFC and Sequence[NFC] are read, others refused by name", "[tokenizer][normalizer][bad-input]") {
  using nlohmann::json;
  CHECK(Normalizer::from_json(json(nullptr), "t.json").form() == Normalizer::Form::None);
  CHECK(Normalizer::from_json(json{{"type", "NFC"}}, "t.json").form() == Normalizer::Form::NFC);
  const json sequence = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  CHECK(Normalizer::from_json(sequence, "t.json").form() == Normalizer::Form::NFC);
  REQUIRE_ERROR_MENTIONS(Normalizer::from_json(json{{"type", "Lowercase"}}, "t.json"), "t.json", "'Lowercase'");
}
