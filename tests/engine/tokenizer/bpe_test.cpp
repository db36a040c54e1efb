// SPDX-License-Identifier: MIT
// The BPE merge loop on hand-built vocabularies, small enough to follow by hand.
#include "core/error.h"
#include "test_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"

using namespace servelab;

namespace {

// Ids 0..255 are the bytes in byte order; then each merged token in the order given.
BpeModel make_model(const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges = false,
                    const std::vector<std::string>& extra_tokens = {}) {
  TokenMap vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace(std::string(byte_to_symbol(static_cast<std::uint8_t>(b))), b);
  std::int32_t next = 256;
  for (const auto& [a, b] : merges) vocab.emplace(a + b, next++);
  for (const auto& t : extra_tokens) vocab.emplace(t, next++);
  return BpeModel(std::move(vocab), merges, ignore_merges, "test");
}

std::vector<std::int32_t> encode(const BpeModel& model, std::string_view word) {
  std::vector<std::int32_t> ids;
  model.encode_word(word, ids);
  return ids;
}

}  // namespace

TEST_CASE("BPE merges the lowest-ranked pair first", "[tokenizer][bpe]") {
  // l o w e r -> lo w e r -> low e r -> low er
  const BpeModel model = make_model({{"l", "o"}, {"lo", "w"}, {"e", "r"}});  // lo=256 low=257 er=258
  CHECK(encode(model, "lower") == std::vector<std::int32_t>{257, 258});
  CHECK(encode(model, "slow") == std::vector<std::int32_t>{'s', 257});
  // Rank beats position: "b c" (rank 0) wins over "a b" (rank 1) although "a b" is further left.
  const BpeModel bc = make_model({{"b", "c"}, {"a", "b"}});  // bc=256 ab=257
  CHECK(encode(bc, "abc") == std::vector<std::int32_t>{'a', 256});
}

TEST_CASE("BPE breaks ties between equal pairs leftmost first", "[tokenizer][bpe]") {
  const BpeModel model = make_model({{"a", "a"}});  // aa=256
  CHECK(encode(model, "aaa") == std::vector<std::int32_t>{256, 'a'});
  CHECK(encode(model, "aaaaa") == std::vector<std::int32_t>{256, 256, 'a'});
}

TEST_CASE("BPE keeps merging the symbols it has just made", "[tokenizer][bpe]") {
  const BpeModel model = make_model({{"a", "a"}, {"aa", "aa"}});  // aa=256 aaaa=257
  CHECK(encode(model, "aaaa") == std::vector<std::int32_t>{257});
  CHECK(encode(model, "aaaaaa") == std::vector<std::int32_t>{257, 256});
  // Bytes outside ASCII go through their byte-level spelling: 한 is three single-byte tokens.
  CHECK(encode(model, "\xed\x95\x9c") == std::vector<std::int32_t>{0xED, 0x95, 0x9C});
  // The cache returns the same answer the second time.
  CHECK(encode(model, "aaaaaa") == std::vector<std::int32_t>{257, 256});
}

TEST_CASE("ignore_merges emits a word found in the vocabulary as one token", "[tokenizer][bpe]") {
  // "xyz" is in the vocabulary but no merge builds it.
  const BpeModel plain = make_model({{"x", "y"}}, false, {"xyz"});  // xy=256 xyz=257
  const BpeModel ignoring = make_model({{"x", "y"}}, true, {"xyz"});
  CHECK(encode(plain, "xyz") == std::vector<std::int32_t>{256, 'z'});
  CHECK(encode(ignoring, "xyz") == std::vector<std::int32_t>{257});
  CHECK(encode(ignoring, "xyzz") == std::vector<std::int32_t>{256, 'z', 'z'});
}

TEST_CASE("a merge listed twice keeps its last rank, as in tokenizers", "[tokenizer][bpe]") {
  // "b c" first has rank 0 and then rank 2, after "a b" (rank 1): so "a b" wins.
  TokenMap vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace(std::string(byte_to_symbol(static_cast<std::uint8_t>(b))), b);
  vocab.emplace("bc", 256);
  vocab.emplace("ab", 257);
  const BpeModel model(std::move(vocab), {{"b", "c"}, {"a", "b"}, {"b", "c"}}, false, "test");
  CHECK(encode(model, "abc") == std::vector<std::int32_t>{257, 'c'});
}

TEST_CASE("a byte without a token is dropped, and its neighbours merge as in tokenizers", "[tokenizer][bpe]") {
  // tokenizers 0.23: BPE(vocab without "b", merges [("a", "c")]) encodes "abc" as the one token "ac".
  TokenMap vocab;
  for (int b = 0; b < 256; ++b)
    if (b != 'b') vocab.emplace(std::string(byte_to_symbol(static_cast<std::uint8_t>(b))), b);
  vocab.emplace("ac", 256);
  const BpeModel model(std::move(vocab), {{"a", "c"}}, false, "test");
  CHECK(encode(model, "abc") == std::vector<std::int32_t>{256});
  CHECK(encode(model, "b").empty());
  CHECK(encode(model, "bb").empty());
  CHECK(encode(model, "xbby") == std::vector<std::int32_t>{'x', 'y'});
}

TEST_CASE("BPE rejects merges of unknown tokens", "[tokenizer][bpe][bad-input]") {
  TokenMap vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace(std::string(byte_to_symbol(static_cast<std::uint8_t>(b))), b);
  REQUIRE_ERROR_MENTIONS(BpeModel(vocab, {{"a", "b"}}, false, "tok.json"), "tok.json", "model.merges[0]", "'ab'",
                         "not in model.vocab");
}
