// SPDX-License-Identifier: MIT
// KVCacheManager, by hand: allocate_slots tops a request's block table up
// only when its tokens cross a block edge, allocates nothing when the pool is
// short (the scheduler then preempts), and free() gives every block back.
#include <optional>
#include <vector>

#include "core/error.h"
#include "sched/kv_cache_manager.h"
#include "test_util.h"

using namespace servelab;

namespace {

using Ids = std::vector<std::int32_t>;

/// A request of @p prompt_len tokens (ids 1..); nothing computed yet.
Request make_request(int id, int prompt_len) {
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(prompt_len));
  for (int i = 0; i < prompt_len; ++i) prompt[static_cast<std::size_t>(i)] = i + 1;
  return Request(id, prompt, SamplingParams{}, 16, {}, 0.0);
}

Ids free_queue(const KVCacheManager& m) {
  return Ids(m.block_pool().free_block_queue().begin(), m.block_pool().free_block_queue().end());
}

/// 4 blocks of 4 tokens, of which request A (id 0, 6 tokens) holds [0, 1]: pool free=[2,3], A -> [0,1].
struct PoolWithRequestA {
  KVCacheManager kv{4, 4};
  Request a = make_request(0, 6);
  PoolWithRequestA() { REQUIRE(kv.allocate_slots(a, 6) == std::optional<Ids>(Ids{0, 1})); }
};

}  // namespace

TEST_CASE("allocate_slots tops up only at block edges", "[kv_cache_manager]") {
  KVCacheManager kv(4, 4);  // 4 blocks of 4 tokens
  Request a = make_request(0, 6);
  // pool now: free=[0,1,2,3]
  auto got = kv.allocate_slots(a, 6);
  // 6 tokens need ceil(6/4) = 2 blocks.  pool now: free=[2,3], A -> [0,1]
  REQUIRE(got.has_value());
  CHECK(*got == Ids{0, 1});
  CHECK(kv.block_table(0).block_ids() == Ids{0, 1});
  CHECK(free_queue(kv) == Ids{2, 3});
  a.num_computed_tokens = 6;  // the step ran

  got = kv.allocate_slots(a, 1);
  // token 7 (index 6) fits in block 1's free tail: no new block.  pool still: free=[2,3], A -> [0,1]
  REQUIRE(got.has_value());
  CHECK(got->empty());
  CHECK(kv.block_table(0).block_ids() == Ids{0, 1});
  CHECK(kv.block_pool().num_free_blocks() == 2);
  a.num_computed_tokens = 7;

  got = kv.allocate_slots(a, 2);
  // tokens 8 and 9 (indices 7, 8): index 7 fills block 1, index 8 starts a third block.
  // pool now: free=[3], A -> [0,1,2]
  REQUIRE(got.has_value());
  CHECK(*got == Ids{2});
  CHECK(kv.block_table(0).block_ids() == Ids{0, 1, 2});
  CHECK(kv.block_table(0).capacity() == 12);
  CHECK(free_queue(kv) == Ids{3});
  CHECK(kv.block_pool().block(2).ref_cnt == 1);
}

TEST_CASE("allocate_slots asking again for the same tokens takes no new block", "[kv_cache_manager]") {
  KVCacheManager kv(4, 4);
  Request a = make_request(0, 5);
  REQUIRE(kv.allocate_slots(a, 5) == std::optional<Ids>(Ids{0, 1}));
  // pool now: free=[2,3], A -> [0,1]; num_computed_tokens is still 0, so 5 tokens still need 2 blocks
  CHECK(kv.allocate_slots(a, 5) == std::optional<Ids>(Ids{}));
  CHECK(kv.allocate_slots(a, 8) == std::optional<Ids>(Ids{}));  // 8 tokens also fit 2 blocks
  CHECK(kv.block_pool().num_free_blocks() == 2);
}

TEST_CASE_METHOD(PoolWithRequestA, "allocate_slots returns nothing and allocates nothing when the pool is short",
                 "[kv_cache_manager]") {
  Request b = make_request(1, 9);
  CHECK_FALSE(kv.allocate_slots(b, 9).has_value());
  // B needs ceil(9/4) = 3 blocks, 2 are free: nothing taken.  pool still: free=[2,3], B -> []
  CHECK(free_queue(kv) == Ids{2, 3});
  CHECK(kv.block_table(1).num_blocks() == 0);
  CHECK(kv.num_requests_holding_blocks() == 1);

  // A growing request that is short also keeps exactly what it had.
  a.num_computed_tokens = 6;
  CHECK_FALSE(kv.allocate_slots(a, 11).has_value());  // 17 tokens need 5 blocks: 3 more, 2 free
  CHECK(kv.block_table(0).block_ids() == Ids{0, 1});
  CHECK(free_queue(kv) == Ids{2, 3});

  // Exactly the free blocks is fine.
  CHECK(kv.allocate_slots(b, 8) == std::optional<Ids>(Ids{2, 3}));
  // pool now: free=[], A -> [0,1], B -> [2,3]
  CHECK(kv.block_pool().num_free_blocks() == 0);
}

TEST_CASE_METHOD(PoolWithRequestA, "free returns every block of a request and forgets its table",
                 "[kv_cache_manager]") {
  Request b = make_request(1, 3);
  REQUIRE(kv.allocate_slots(b, 3).has_value());
  // pool now: free=[3], A -> [0,1], B -> [2]
  CHECK(kv.block_table(1).block_ids() == Ids{2});
  kv.free(a);
  // pool now: free=[3,0,1], B -> [2]
  CHECK(free_queue(kv) == Ids{3, 0, 1});
  CHECK(kv.block_table(0).num_blocks() == 0);
  CHECK(kv.num_requests_holding_blocks() == 1);
  kv.free(a);  // a request with no blocks: nothing happens
  CHECK(kv.block_pool().num_free_blocks() == 3);
  kv.free(b);
  // pool now: free=[3,0,1,2], nobody holds a block
  CHECK(free_queue(kv) == Ids{3, 0, 1, 2});
  CHECK(kv.num_requests_holding_blocks() == 0);
  for (int id = 0; id < 4; ++id) CHECK(kv.block_pool().block(id).ref_cnt == 0);
  // A freed request starts over from a fresh table.
  CHECK(kv.allocate_slots(a, 4) == std::optional<Ids>(Ids{3}));
}

TEST_CASE("num_blocks_for is ceil(tokens / block_size)", "[kv_cache_manager]") {
  KVCacheManager kv(8, 4);
  CHECK(kv.num_blocks_for(0) == 0);
  CHECK(kv.num_blocks_for(1) == 1);
  CHECK(kv.num_blocks_for(4) == 1);
  CHECK(kv.num_blocks_for(5) == 2);
  CHECK(kv.num_blocks_for(16) == 4);
  KVCacheManager one(3, 1);
  CHECK(one.num_blocks_for(3) == 3);
}

TEST_CASE("kv cache manager refuses non-positive sizes by name", "[kv_cache_manager][bad-input]") {
  REQUIRE_ERROR_MENTIONS(KVCacheManager(4, 0), "--block-size", "got 0");
  REQUIRE_ERROR_MENTIONS(KVCacheManager(4, -16), "--block-size", "got -16");
  REQUIRE_ERROR_MENTIONS(KVCacheManager(0, 4), "num_blocks", "got 0");
  KVCacheManager kv(4, 4);
  Request a = make_request(0, 2);
  REQUIRE_ERROR_MENTIONS(kv.allocate_slots(a, -1), "num_new_tokens", "-1");
}
