// SPDX-License-Identifier: MIT
// Hidden lab 04 tests: block size 1, shared blocks, and allocate_slots of nothing.
#include "kv/block_pool.h"
#include "kv/kv_view.h"
#include "sched/kv_cache_manager.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("hidden: block size 1 maps every token to its own block", "[lab04][hidden]") {
  const std::int32_t table[] = {4, 0, 3};
  const KVView v{nullptr, nullptr, 1, table, 1};
  CHECK(v.row(0) == 4);
  CHECK(v.row(1) == 0);
  CHECK(v.row(2) == 3);
}

TEST_CASE("hidden: allocate_slots of zero tokens takes nothing, and free of a request with nothing is fine",
          "[lab04][hidden]") {
  KVCacheManager kv(3, 4);
  const Request r(0, std::vector<std::int32_t>(4, 1), {}, 4, {}, 0);
  const auto none = kv.allocate_slots(r, 0);
  REQUIRE(none.has_value());
  CHECK(none->empty());
  CHECK(kv.block_pool().num_free_blocks() == 3);
  kv.free(r);
  CHECK(kv.allocate_slots(r, 12).value() == std::vector<std::int32_t>{0, 1, 2});
  CHECK_FALSE(kv.allocate_slots(r, 13).has_value());
  kv.free(r);
  CHECK(kv.block_pool().num_free_blocks() == 3);
}
