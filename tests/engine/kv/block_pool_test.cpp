// SPDX-License-Identifier: MIT
// BlockPool, by hand: a pool of 4 blocks driven by narrated scripts. Each
// comment says what the pool holds after the line above it, so a learner can
// follow the free-block queue and the reference counts on paper.
#include <deque>
#include <vector>

#include "core/error.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "test_util.h"

using namespace servelab;

namespace {

using Ids = std::vector<std::int32_t>;

/// The free-block queue, front first, as a vector (Catch prints it on failure).
Ids free_queue(const BlockPool& pool) { return Ids(pool.free_block_queue().begin(), pool.free_block_queue().end()); }

}  // namespace

TEST_CASE("block pool script: two requests take blocks and give them back to the back of the queue", "[block_pool]") {
  BlockPool pool(4);
  // pool now: free=[0,1,2,3]
  CHECK(pool.num_blocks() == 4);
  CHECK(free_queue(pool) == Ids{0, 1, 2, 3});
  for (int b = 0; b < 4; ++b) CHECK(pool.block(b).ref_cnt == 0);
  CHECK(pool.usage() == 0.0);

  const Ids a = pool.get_new_blocks(2);
  // pool now: free=[2,3], A -> [0,1]
  CHECK(a == Ids{0, 1});
  CHECK(free_queue(pool) == Ids{2, 3});
  CHECK(pool.block(0).ref_cnt == 1);
  CHECK(pool.block(1).ref_cnt == 1);
  CHECK(pool.block(2).ref_cnt == 0);
  CHECK(pool.usage() == 0.5);

  const Ids b = pool.get_new_blocks(1);
  // pool now: free=[3], A -> [0,1], B -> [2]
  CHECK(b == Ids{2});
  CHECK(free_queue(pool) == Ids{3});
  CHECK(pool.num_free_blocks() == 1);

  pool.free_blocks(a);
  // pool now: free=[3,0,1], B -> [2]   (A's blocks join the back, in A's order)
  CHECK(free_queue(pool) == Ids{3, 0, 1});
  CHECK(pool.block(0).ref_cnt == 0);
  CHECK(pool.block(1).ref_cnt == 0);

  const Ids c = pool.get_new_blocks(2);
  // pool now: free=[1], B -> [2], C -> [3,0]   (C's blocks are not adjacent: that is fine when paged)
  CHECK(c == Ids{3, 0});
  CHECK(free_queue(pool) == Ids{1});

  pool.free_blocks(b);
  pool.free_blocks(c);
  // pool now: free=[1,2,3,0], nobody holds a block
  CHECK(free_queue(pool) == Ids{1, 2, 3, 0});
  CHECK(pool.num_free_blocks() == pool.num_blocks());
  for (int id = 0; id < 4; ++id) CHECK(pool.block(id).ref_cnt == 0);
}

TEST_CASE("block pool script: freeing in reverse order queues the blocks in that order", "[block_pool]") {
  BlockPool pool(4);
  const Ids all = pool.get_new_blocks(4);
  // pool now: free=[], A -> [0,1,2,3]
  CHECK(all == Ids{0, 1, 2, 3});
  CHECK(pool.num_free_blocks() == 0);
  CHECK(pool.usage() == 1.0);

  // vLLM frees a request's blocks tail first, so the tail (the least useful to
  // reuse for a shared prefix) is handed out first next time.
  pool.free_blocks(Ids{3, 2, 1, 0});
  // pool now: free=[3,2,1,0]
  CHECK(free_queue(pool) == Ids{3, 2, 1, 0});
  CHECK(pool.get_new_blocks(1) == Ids{3});
  // pool now: free=[2,1,0], B -> [3]
  CHECK(free_queue(pool) == Ids{2, 1, 0});
}

TEST_CASE("block pool script: asking for zero blocks or exactly the free ones", "[block_pool]") {
  BlockPool pool(4);
  CHECK(pool.get_new_blocks(0).empty());
  // pool now: free=[0,1,2,3]
  CHECK(free_queue(pool) == Ids{0, 1, 2, 3});
  CHECK(pool.get_new_blocks(4) == Ids{0, 1, 2, 3});
  // pool now: free=[]
  CHECK(pool.get_new_blocks(0).empty());
  CHECK(pool.num_free_blocks() == 0);
}

TEST_CASE("block pool refuses a double free and leaves the queue unchanged", "[block_pool][bad-input]") {
  BlockPool pool(4);
  const Ids a = pool.get_new_blocks(2);
  // pool now: free=[2,3], A -> [0,1]
  pool.free_blocks(a);
  // pool now: free=[2,3,0,1]
  REQUIRE_ERROR_MENTIONS(pool.free_blocks(a), "block 0", "already free");
  // pool still: free=[2,3,0,1] and every count 0 (the check came before any change)
  CHECK(free_queue(pool) == Ids{2, 3, 0, 1});
  for (int id = 0; id < 4; ++id) CHECK(pool.block(id).ref_cnt == 0);
  // A block never handed out is free too.
  REQUIRE_ERROR_MENTIONS(pool.free_blocks(Ids{3}), "block 3", "already free");
}

TEST_CASE("block pool refuses block ids outside the pool", "[block_pool][bad-input]") {
  BlockPool pool(4);
  pool.get_new_blocks(4);
  // pool now: free=[], A -> [0,1,2,3]
  REQUIRE_ERROR_MENTIONS(pool.free_blocks(Ids{4}), "block 4 out of range [0, 4)");
  REQUIRE_ERROR_MENTIONS(pool.free_blocks(Ids{-1}), "block -1 out of range [0, 4)");
  REQUIRE_ERROR_MENTIONS(pool.block(4), "block 4 out of range [0, 4)");
  REQUIRE_ERROR_MENTIONS(pool.block(-1), "out of range");
  CHECK(pool.num_free_blocks() == 0);
}

TEST_CASE("block pool refuses to hand out more blocks than are free and hands out none", "[block_pool][bad-input]") {
  BlockPool pool(4);
  pool.get_new_blocks(3);
  // pool now: free=[3], A -> [0,1,2]
  REQUIRE_ERROR_MENTIONS(pool.get_new_blocks(2), "asked for 2 blocks", "1 are free");
  // pool still: free=[3]
  CHECK(free_queue(pool) == Ids{3});
  CHECK(pool.block(3).ref_cnt == 0);
  REQUIRE_ERROR_MENTIONS(pool.get_new_blocks(-1), "asked for -1 blocks");
  CHECK(pool.get_new_blocks(1) == Ids{3});
}

TEST_CASE("block pool needs at least one block", "[block_pool][bad-input]") {
  REQUIRE_ERROR_MENTIONS(BlockPool(0), "num_blocks must be >= 1", "got 0");
  REQUIRE_ERROR_MENTIONS(BlockPool(-3), "num_blocks must be >= 1", "got -3");
}

TEST_CASE("block table maps logical tokens to physical slots through blocks that are not adjacent",
          "[block_pool][block_table]") {
  // block_size 4, table [3, 0]: logical tokens 0..3 live in block 3 (slots 12..15), 4..7 in block 0 (slots 0..3).
  BlockTable table(4);
  CHECK(table.num_blocks() == 0);
  CHECK(table.capacity() == 0);
  table.append(Ids{3, 0});
  CHECK(table.block_ids() == Ids{3, 0});
  CHECK(table.capacity() == 8);
  CHECK(table.slot(0) == 12);
  CHECK(table.slot(3) == 15);
  CHECK(table.slot(4) == 0);
  CHECK(table.slot(6) == 2);
  table.append(Ids{2});
  // table now: [3,0,2], token 8 -> block 2 slot 8
  CHECK(table.slot(8) == 8);
  CHECK(table.capacity() == 12);
  table.clear();
  CHECK(table.num_blocks() == 0);
}
