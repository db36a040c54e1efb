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
 *
 * With prefix caching (vLLM's --enable-prefix-caching), a waiting request
 * first asks get_computed_blocks() for the longest run of its leading full
 * blocks whose K/V are already in the pool (found by their chained hashes),
 * shares those blocks (their ref_cnt goes up) and computes only the rest.
 * A block becomes findable once its K/V have been computed (cache_blocks()
 * after each step), and stays findable after it is freed until it is
 * evicted. A request frees its blocks tail first, so the blocks of a shared
 * prefix, at the head of many requests, are the last to be evicted.
 * @verbatim
 *  block_size 4, A = [s s s s | s s s s | a a]   (8 system-prompt tokens s, then its own)
 *  A computed and finished: free = [.., 2, 1, 0]  blocks 0 and 1 cached under h(s s s s), h(h0, s s s s)
 *  B = [s s s s | s s s s | b]: get_computed_blocks(B) = blocks [0, 1], 8 tokens;
 *    B starts with num_computed_tokens 8 and computes 1 token in its first step
 * @endverbatim
 */
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "sched/request.h"

namespace servelab {

/// Block bookkeeping for every request that holds KV.
class KVCacheManager {
 public:
  /**
   * @brief A manager over a pool of @p num_blocks blocks of @p block_size tokens.
   * @param enable_caching prefix caching: full blocks are shared between requests by hash.
   * @throws Error naming --block-size or the block count when one is not positive.
   */
  KVCacheManager(int num_blocks, int block_size, bool enable_caching = false);

  /// A cached prefix: the blocks that hold it and the tokens they cover (num_tokens = blocks × block_size).
  struct ComputedBlocks {
    std::vector<std::int32_t> blocks;  ///< block ids, logical order
    int num_tokens = 0;                ///< tokens they hold
  };

  /**
   * @brief The longest prefix of @p request's full blocks whose K/V are cached, as vLLM's
   *        get_computed_blocks: block i is a hit when its chained hash is cached and every
   *        block before it was a hit. At most num_tokens() - 1 tokens: the last token is always
   *        computed, so the step that computes it has logits to sample from.
   * @return nothing (no blocks, 0 tokens) with caching off, or when the request already has
   *         computed tokens or blocks. Nothing is taken: allocate_slots() takes the blocks.
   */
  ComputedBlocks get_computed_blocks(const Request& request);

  /**
   * @brief Makes room for @p num_new_tokens more tokens of @p request after
   *        its request.num_computed_tokens.
   * @return the blocks added to its table (possibly none), or nothing when
   *         the pool has too few free blocks; then nothing was allocated.
   */
  std::optional<std::vector<std::int32_t>> allocate_slots(const Request& request, int num_new_tokens);

  /**
   * @brief Admission with a prefix cache hit: shares @p computed's blocks (touch: ref_cnt + 1,
   *        out of the free queue) as the first blocks of @p request's table, then makes room
   *        for @p num_new_tokens more, all or nothing. The caller has already advanced
   *        request.num_computed_tokens by computed.num_tokens. Counts the request's tokens
   *        as prefix cache queries and computed.num_tokens as hits.
   * @return the new blocks (not the shared ones), or nothing when the pool is too short for
   *         them (shared blocks that were free count against it); then nothing was taken.
   */
  std::optional<std::vector<std::int32_t>> allocate_slots(const Request& request, int num_new_tokens,
                                                          const ComputedBlocks& computed);

  /**
   * @brief After a step: makes @p request's full blocks among its first num_computed_tokens
   *        tokens findable by hash (vLLM's cache_blocks); a no-op with caching off.
   */
  void cache_blocks(const Request& request);

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
  /// True when prefix caching is on.
  bool enable_caching() const { return pool_.enable_caching(); }
  /// Prefix cache queries so far: the tokens of every request admitted with caching on (vLLM's prefix_cache_queries).
  long prefix_cache_queries() const { return queries_; }
  /// Of those, tokens found cached (vLLM's prefix_cache_hits).
  long prefix_cache_hits() const { return hits_; }

 private:
  int block_size_;
  BlockPool pool_;
  /// The hashes of @p request's full blocks, extended to its tokens now.
  const std::vector<BlockHash>& block_hashes(const Request& request);

  std::unordered_map<int, BlockTable> tables_;  // request_id -> its blocks
  BlockTable empty_;
  std::unordered_map<int, std::vector<BlockHash>> block_hashes_;  // request_id -> its full blocks' hashes
  std::unordered_map<int, int> num_cached_;                       // request_id -> its leading blocks already cached
  long queries_ = 0;
  long hits_ = 0;
};

}  // namespace servelab
