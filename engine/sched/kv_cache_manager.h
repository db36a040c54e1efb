// SPDX-License-Identifier: MIT
/**
 * @file kv_cache_manager.h
 * @brief Gives requests KV blocks as they grow and takes them back
 *        (vLLM v1: KVCacheManager::allocate_slots / free).
 *
 * The scheduler asks allocate_slots(request, n) before it schedules n new
 * tokens of a request. The manager tops the request's BlockTable up to
 * ceil((num_computed_tokens + n) / block_size) blocks from the BlockPool, or,
 * when the pool has too few free blocks, allocates nothing and says so: the
 * scheduler then preempts someone and asks again.
 * @verbatim
 *  block_size 4, pool of 4 blocks, free = [0, 1, 2, 3]
 *  allocate_slots(A, 6)  A -> [0, 1]        free = [2, 3]   (6 tokens need 2 blocks)
 *  allocate_slots(A, 1)  A -> [0, 1]        free = [2, 3]   (token 7 fits in block 1)
 *  allocate_slots(B, 9)  nothing: 3 blocks needed, 2 free
 *  free(A)                                  free = [2, 3, 0, 1]
 * @endverbatim
 */
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "sched/request.h"

namespace servelab {

/// Block bookkeeping for every request that holds KV.
class KVCacheManager {
 public:
  /**
   * @brief A manager over a pool of @p num_blocks blocks of @p block_size tokens.
   * @throws Error naming --block-size or the block count when one is not positive.
   */
  KVCacheManager(int num_blocks, int block_size);

  /**
   * @brief Makes room for @p num_new_tokens more tokens of @p request after
   *        its request.num_computed_tokens.
   * @return the blocks added to its table (possibly none), or nothing when
   *         the pool has too few free blocks; then nothing was allocated.
   */
  std::optional<std::vector<std::int32_t>> allocate_slots(const Request& request, int num_new_tokens);

  /// Returns every block of @p request to the pool and forgets its table; a request with none is fine.
  void free(const Request& request);

  /// The blocks of request @p request_id; an empty table when it holds none.
  const BlockTable& block_table(int request_id) const;
  /// Blocks needed to hold @p num_tokens tokens: ceil(num_tokens / block_size).
  int num_blocks_for(long num_tokens) const;
  /// Tokens per block.
  int block_size() const { return block_size_; }
  /// The pool (for meters and tests).
  const BlockPool& block_pool() const { return pool_; }
  /// Requests that hold blocks now.
  int num_requests_holding_blocks() const { return static_cast<int>(tables_.size()); }

 private:
  int block_size_;
  BlockPool pool_;
  std::unordered_map<int, BlockTable> tables_;  // request_id -> its blocks
  BlockTable empty_;
};

}  // namespace servelab
