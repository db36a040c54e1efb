// The contiguous cache allocates exactly the formula's bytes, and a KVView
// maps logical tokens through a block table when one is given.
#include "core/error.h"
#include "kv/kv_cache.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("contiguous KV bytes = 2 * layers * kv_heads * head_dim * L * B * 4", "[kv]") {
  for (int kv_heads : {4, 2, 1}) {  // MHA, GQA, MQA of the tiny preset
    ModelConfig c = preset("tiny");
    c.num_key_value_heads = kv_heads;
    const int L = 100, B = 3;
    ContiguousKVCache cache(c, B, L);
    CHECK(cache.bytes_allocated() == 2ull * c.num_hidden_layers * kv_heads * c.head_dim * L * B * sizeof(float));
  }
}

TEST_CASE("slots and layers do not overlap", "[kv]") {
  const ModelConfig c = preset("tiny");
  ContiguousKVCache cache(c, 2, 5);
  const KVView a = cache.view(0, 0), b = cache.view(0, 1), l1 = cache.view(1, 0);
  CHECK(b.key(0) - a.key(0) == 5 * c.kv_dim());      // slot 1 starts after slot 0's 5 rows
  CHECK(l1.key(0) - a.key(0) == 2 * 5 * c.kv_dim());  // layer 1 after both slots of layer 0
  CHECK(a.key(4) + c.kv_dim() == b.key(0));
  REQUIRE_ERROR_MENTIONS(cache.view(0, 2), "slot 2");
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
