// SPDX-License-Identifier: MIT
// The default KV budget of `servelab serve` (kv/kv_budget.h), on numbers a
// reader can redo by hand.
#include "kv/kv_budget.h"
#include "test_util.h"

using namespace servelab;

namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;

}  // namespace

TEST_CASE("the default KV budget is every seat's largest prompt, or one longest request, in whole blocks",
          "[kv_budget]") {
  // SmolLM2-135M's shape in f32: 30 layers x 2 x 3 KV heads x 64 x 4 bytes = 46,080 bytes a token.
  const std::size_t token = 46080;
  // 16 seats x min(8192, 2048) = 32,768 tokens (1.41 GiB) beats one 8,192-token request; 64 GiB free caps nothing.
  const KVBudget b = default_kv_budget(token, 16, 16, 8192, 2048, 64 * kGiB);
  CHECK(b.tokens == 32768);
  CHECK(b.bytes == 32768 * token);
  CHECK(b.need_bytes == 32768 * token);
  CHECK(b.cap_bytes == kMaxDefaultKVBytes);
  // One seat: the longest request decides.
  CHECK(default_kv_budget(token, 16, 1, 8192, 2048, 64 * kGiB).tokens == 8192);
  // Short contexts: seats x max_model_len.
  CHECK(default_kv_budget(token, 16, 4, 512, 2048, 64 * kGiB).tokens == 2048);
  // A machine with 2 GiB available gives a quarter of it: 512 MiB / (16 x 46,080) = 728 whole blocks.
  const KVBudget small = default_kv_budget(token, 16, 16, 8192, 2048, 2 * kGiB);
  CHECK(small.cap_bytes == kGiB / 2);
  CHECK(small.tokens == 728 * 16);
  // Unknown memory (0): only the 4 GiB cap; a huge need is held to it.
  CHECK(default_kv_budget(token, 16, 256, 32768, 32768, 0).bytes <= kMaxDefaultKVBytes);
  // Never less than one block.
  CHECK(default_kv_budget(token, 16, 1, 1, 1, 1).tokens == 16);
  CHECK(b.describe().find("1.41 GiB") != std::string::npos);
}

TEST_CASE("the default KV budget refuses sizes below 1", "[kv_budget][bad-input]") {
  REQUIRE_ERROR_MENTIONS(default_kv_budget(100, 0, 1, 1, 1, 0), "sizes must be >= 1");
  REQUIRE_ERROR_MENTIONS(default_kv_budget(100, 16, 1, 0, 1, 0), "sizes must be >= 1");
}

TEST_CASE("MemAvailable is read from /proc/meminfo where there is one", "[kv_budget]") {
  const std::size_t available = mem_available_bytes();
  if (std::ifstream("/proc/meminfo").good())
    CHECK(available > 0);
  else
    CHECK(available == 0);
}
