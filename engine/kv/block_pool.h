// SPDX-License-Identifier: MIT
/**
 * @file block_pool.h
 * @brief The pool of fixed-size KV blocks that every request's KV lives in
 *        (vLLM v1: BlockPool, KVCacheBlock, free_block_queue).
 *
 * PagedAttention splits KV storage into blocks of block_size tokens. A
 * request holds a list of blocks (its BlockTable) that need not be adjacent,
 * so the only waste is the unused tail of each request's last block.
 * @verbatim
 *  pool of 4:      free = [0, 1, 2, 3]
 *  A takes 2:      free = [2, 3]        A -> [0, 1]
 *  B takes 1:      free = [3]           B -> [2]
 *  A frees:        free = [3, 0, 1]     (freed blocks join the back of the queue)
 * @endverbatim
 *
 * With prefix caching (vLLM's automatic prefix caching) a full block keeps
 * its hash (kv/block_hash.h) after its last holder frees it: it waits in the
 * free queue with its K/V intact, and a later request whose prefix hashes
 * the same takes it back from there (touch()) instead of recomputing it. A
 * cached free block is still free: the next get_new_blocks() that reaches it
 * at the front of the queue evicts it (forgets its hash), so the blocks
 * freed longest ago are evicted first (LRU).
 * @verbatim
 *  A (8 tokens, blocks [0, 1], hashes h0 h1) frees:   free = [2, 3, 1, 0]   cached {h0: 0, h1: 1}
 *  B shares A's first block:   touch([0])              free = [2, 3, 1]      block 0 ref_cnt 1
 *  C takes 3 blocks:           [2, 3, 1]               block 1 evicted: cached {h0: 0}
 * @endverbatim
 */
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace servelab {

/// One block's bookkeeping (the K/V bytes live in KVCache, indexed by block_id).
struct KVCacheBlock {
  std::int32_t block_id = 0;  ///< index into the KV cache's [num_blocks, ...] storage
  int ref_cnt = 0;            ///< requests holding the block; 0 = in the free queue
  /// With prefix caching: the hash of the full block's tokens while its K/V are findable by it; none otherwise.
  std::optional<BlockHash> block_hash;
};

/// Free-block queue and reference counts over blocks 0 .. num_blocks-1.
class BlockPool {
 public:
  /**
   * @brief A pool with every block free, queued in id order.
   * @param enable_caching keep freed full blocks findable by hash until evicted (prefix caching).
   * @throws Error when @p num_blocks < 1.
   */
  explicit BlockPool(int num_blocks, bool enable_caching = false);

  /// True when freed full blocks stay cached.
  bool enable_caching() const { return enable_caching_; }

  /// Blocks in the pool, free or not.
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  /// Blocks in the free queue.
  int num_free_blocks() const { return static_cast<int>(free_block_queue_.size()); }
  /// Fraction of blocks in use, 0..1.
  double usage() const { return 1.0 - static_cast<double>(num_free_blocks()) / num_blocks(); }

  /**
   * @brief Takes @p n blocks from the front of the free queue, each with ref_cnt 1.
   * @return their ids in queue order (the oldest freed first); empty for n = 0.
   * @throws Error when @p n is negative or fewer than @p n blocks are free (callers check
   *         num_free_blocks() first: running out is a scheduling decision, not an error).
   */
  std::vector<std::int32_t> get_new_blocks(int n);

  /**
   * @brief Drops one reference to each block; a block whose count reaches 0
   *        joins the back of the free queue, in the order given (a request
   *        frees its table in order, so its blocks are reused in that order).
   *        An empty span changes nothing.
   * @throws Error when a block id is out of range or already free; then no count changes.
   */
  void free_blocks(std::span<const std::int32_t> block_ids);

  /**
   * @brief The block that holds the K/V of a full block hashing to @p hash, held or free; none
   *        when no such block is cached (or caching is off).
   */
  std::optional<std::int32_t> get_cached_block(BlockHash hash) const;

  /**
   * @brief One more reference to each block, for a request that shares them (a prefix cache hit):
   *        a block that was free (ref_cnt 0) leaves the free queue, so it cannot be evicted while held.
   * @throws Error when a block id is out of range; then no count changes.
   */
  void touch(std::span<const std::int32_t> block_ids);

  /**
   * @brief Makes full blocks findable: block_ids[i] gets hashes[i]. A block that already has a
   *        hash keeps it; a hash already cached in another block leaves this block uncached
   *        (the first copy of a prefix is the one found).
   * @throws Error when the spans differ in length, a block id is out of range, or a block is free.
   */
  void cache_full_blocks(std::span<const std::int32_t> block_ids, std::span<const BlockHash> hashes);

  /// Blocks findable by hash now, held or free.
  int num_cached_blocks() const { return static_cast<int>(cached_block_hash_to_block_.size()); }

  /// Bookkeeping of block @p block_id. @throws Error when out of range.
  const KVCacheBlock& block(std::int32_t block_id) const;
  /// Free block ids, front (next to be handed out) first.
  const std::deque<std::int32_t>& free_block_queue() const { return free_block_queue_; }

 private:
  /// Before the front @p n free blocks are handed out: forgets the hashes of those that are cached.
  void evict_front(int n);

  bool enable_caching_;
  std::vector<KVCacheBlock> blocks_;
  std::deque<std::int32_t> free_block_queue_;
  std::unordered_map<BlockHash, std::int32_t> cached_block_hash_to_block_;  // hash -> the block holding it
};

}  // namespace servelab
