// SPDX-License-Identifier: MIT
// KV storage: the allocation is exactly the formula's bytes, blocks and
// layers do not overlap, a KVView maps logical tokens through a block table,
// and blocks move between caches as bytes unchanged.
#include <numeric>

#include "core/error.h"
#include "kv/kv_cache.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("KV bytes = 2 * layers * kv_heads * head_dim * tokens * 4", "[kv]") {
  for (int kv_heads : {4, 2, 1}) {  // MHA, GQA, MQA of the tiny preset
    ModelConfig c = preset("tiny");
    c.num_key_value_heads = kv_heads;
    const int L = 100, B = 3;  // contiguous: B sequences, one block of L tokens each
    HostKVCache cache(c, B, L);
    CHECK(cache.bytes_allocated() == 2ull * c.num_hidden_layers * kv_heads * c.head_dim * L * B * sizeof(float));
    CHECK(cache.bytes_allocated() == kv_cache_bytes_for(c, B, L));
  }
}

TEST_CASE("blocks and layers do not overlap", "[kv]") {
  const ModelConfig c = preset("tiny");
  HostKVCache cache(c, 2, 5);
  const std::int32_t b0[] = {0}, b1[] = {1};
  const KVView a = cache.view(0, b0), b = cache.view(0, b1), l1 = cache.view(1, b0);
  CHECK(a.block_table == nullptr);                    // one block: the contiguous path
  CHECK(b.key(0) - a.key(0) == 5 * c.kv_dim());       // block 1 starts after block 0's 5 rows
  CHECK(l1.key(0) - a.key(0) == 2 * 5 * c.kv_dim());  // layer 1 after both blocks of layer 0
  CHECK(a.key(4) + c.kv_dim() == b.key(0));
  const std::int32_t bad[] = {2};
  REQUIRE_ERROR_MENTIONS(cache.view(0, bad), "block 2 out of range [0, 2)");
  REQUIRE_ERROR_MENTIONS(cache.view(2, b0), "layer 2");
}

TEST_CASE("a block table maps logical tokens to physical rows", "[kv]") {
  std::vector<float> k(8 * 2), v(8 * 2);
  const std::int32_t table[] = {3, 0};  // logical block 0 -> physical 3, block 1 -> physical 0
  KVView view{k.data(), v.data(), 2, table, 2};
  // pool rows: [p0: t2 t3][p1: - -][p2: - -][p3: t0 t1]
  CHECK(view.row(0) == 6);
  CHECK(view.row(1) == 7);
  CHECK(view.row(2) == 0);
  CHECK(view.row(3) == 1);
  CHECK(view.value(3) == v.data() + 2);
}

TEST_CASE("exported blocks import into other block ids byte for byte", "[kv]") {
  const ModelConfig c = preset("tiny");
  HostKVCache a(c, 4, 3), b(c, 6, 3);
  for (int l = 0; l < c.num_hidden_layers; ++l) {  // distinct values everywhere in a
    float* k = a.key_blocks(l);
    float* v = a.value_blocks(l);
    const std::size_t n = 4 * 3 * a.kv_dim();
    std::iota(k, k + n, 1000.0f * l);
    std::iota(v, v + n, -1000.0f * l - 1);
  }
  const std::vector<std::int32_t> from = {2, 0}, to = {5, 1};
  std::vector<std::byte> bytes(from.size() * a.bytes_per_block());
  a.export_blocks(from, bytes);
  b.import_blocks(to, bytes);
  for (int l = 0; l < c.num_hidden_layers; ++l)
    for (std::size_t i = 0; i < from.size(); ++i) {
      const KVView src = a.view(l, std::span(&from[i], 1)), dst = b.view(l, std::span(&to[i], 1));
      for (int t = 0; t < 3; ++t)
        for (std::size_t d = 0; d < a.kv_dim(); ++d) {
          CHECK(dst.key(t)[d] == src.key(t)[d]);
          CHECK(dst.value(t)[d] == src.value(t)[d]);
        }
    }
  std::vector<std::byte> short_buffer(bytes.size() - 1);
  REQUIRE_ERROR_MENTIONS(a.export_blocks(from, short_buffer), "KV export");
  REQUIRE_ERROR_MENTIONS(b.import_blocks(to, short_buffer), "KV import", "another model shape or block size");
  const std::vector<std::int32_t> outside = {0, 6};
  REQUIRE_ERROR_MENTIONS(b.import_blocks(outside, bytes), "block 6 out of range");
}

TEST_CASE("KV sizes are checked before anything is allocated", "[kv][bad-input]") {
  const ModelConfig c = preset("tiny");
  REQUIRE_ERROR_MENTIONS(HostKVCache(c, 0, 16), "--num-blocks must be positive");
  REQUIRE_ERROR_MENTIONS(HostKVCache(c, 4, 0), "--block-size must be positive");
  REQUIRE_ERROR_MENTIONS(kv_cache_bytes_for(c, std::int64_t{1} << 40, std::int64_t{1} << 30), "overflow");
}
