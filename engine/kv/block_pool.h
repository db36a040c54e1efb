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
 */
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace servelab {

/// One block's bookkeeping (the K/V bytes live in KVCache, indexed by block_id).
struct KVCacheBlock {
  std::int32_t block_id = 0;  ///< index into the KV cache's [num_blocks, ...] storage
  int ref_cnt = 0;            ///< requests holding the block; 0 = in the free queue
};

/// Free-block queue and reference counts over blocks 0 .. num_blocks-1.
class BlockPool {
 public:
  /**
   * @brief A pool with every block free, queued in id order.
   * @throws Error when @p num_blocks < 1.
   */
  explicit BlockPool(int num_blocks);

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

  /// Bookkeeping of block @p block_id. @throws Error when out of range.
  const KVCacheBlock& block(std::int32_t block_id) const;
  /// Free block ids, front (next to be handed out) first.
  const std::deque<std::int32_t>& free_block_queue() const { return free_block_queue_; }

 private:
  std::vector<KVCacheBlock> blocks_;
  std::deque<std::int32_t> free_block_queue_;
};

}  // namespace servelab
