// SPDX-License-Identifier: MIT
#include "kv/block_pool.h"

#include <algorithm>

#include "core/error.h"

namespace servelab {

BlockPool::BlockPool(int num_blocks, bool enable_caching) : enable_caching_(enable_caching) {
  check(num_blocks >= 1, "block pool: num_blocks must be >= 1, got ", num_blocks);
  blocks_.resize(static_cast<std::size_t>(num_blocks));
  for (int i = 0; i < num_blocks; ++i) {
    blocks_[static_cast<std::size_t>(i)].block_id = i;
    free_block_queue_.push_back(i);
  }
}

std::vector<std::int32_t> BlockPool::get_new_blocks(int n) {
  check(n >= 0 && n <= num_free_blocks(), "block pool: asked for ", n, " blocks but ", num_free_blocks(), " are free");
  evict_front(n);
  // BEGIN LAB04 SOLUTION: BlockPool::get_new_blocks
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const std::int32_t id = free_block_queue_.front();
    free_block_queue_.pop_front();
    blocks_[static_cast<std::size_t>(id)].ref_cnt = 1;
    out.push_back(id);
  }
  return out;
  // END LAB04 SOLUTION
}

void BlockPool::free_blocks(std::span<const std::int32_t> block_ids) {
  // BEGIN LAB04 SOLUTION: BlockPool::free_blocks
  // All or nothing: check every id before changing any count.
  for (std::int32_t id : block_ids) {
    check(id >= 0 && id < num_blocks(), "block pool: block ", id, " out of range [0, ", num_blocks(), ")");
    check(blocks_[static_cast<std::size_t>(id)].ref_cnt > 0, "block pool: block ", id, " is already free");
  }
  for (std::int32_t id : block_ids) {
    KVCacheBlock& b = blocks_[static_cast<std::size_t>(id)];
    if (--b.ref_cnt == 0) free_block_queue_.push_back(id);
  }
  // END LAB04 SOLUTION
}

void BlockPool::evict_front(int n) {
  // BEGIN LAB04 SOLUTION: BlockPool::evict_front, a cached free block is forgotten when it is handed out again
  for (int i = 0; i < n; ++i) {
    KVCacheBlock& b = blocks_[static_cast<std::size_t>(free_block_queue_[static_cast<std::size_t>(i)])];
    if (!b.block_hash) continue;
    const auto it = cached_block_hash_to_block_.find(*b.block_hash);
    if (it != cached_block_hash_to_block_.end() && it->second == b.block_id) cached_block_hash_to_block_.erase(it);
    b.block_hash.reset();
  }
  // END LAB04 SOLUTION
}

std::optional<std::int32_t> BlockPool::get_cached_block(BlockHash hash) const {
  const auto it = cached_block_hash_to_block_.find(hash);
  if (it == cached_block_hash_to_block_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::touch(std::span<const std::int32_t> block_ids) {
  for (std::int32_t id : block_ids)
    check(id >= 0 && id < num_blocks(), "block pool: block ", id, " out of range [0, ", num_blocks(), ")");
  // BEGIN LAB04 SOLUTION: BlockPool::touch, a shared block gains a reference and leaves the free queue
  for (std::int32_t id : block_ids) {
    KVCacheBlock& b = blocks_[static_cast<std::size_t>(id)];
    if (b.ref_cnt++ == 0) free_block_queue_.erase(std::find(free_block_queue_.begin(), free_block_queue_.end(), id));
  }
  // END LAB04 SOLUTION
}

void BlockPool::cache_full_blocks(std::span<const std::int32_t> block_ids, std::span<const BlockHash> hashes) {
  check(block_ids.size() == hashes.size(), "block pool: ", block_ids.size(), " blocks to cache but ", hashes.size(),
        " hashes");
  for (std::int32_t id : block_ids) check(block(id).ref_cnt > 0, "block pool: block ", id, " is free, not full");
  if (!enable_caching_) return;
  for (std::size_t i = 0; i < block_ids.size(); ++i) {
    KVCacheBlock& b = blocks_[static_cast<std::size_t>(block_ids[i])];
    if (b.block_hash) continue;
    if (cached_block_hash_to_block_.try_emplace(hashes[i], b.block_id).second) b.block_hash = hashes[i];
  }
}

const KVCacheBlock& BlockPool::block(std::int32_t block_id) const {
  check(block_id >= 0 && block_id < num_blocks(), "block pool: block ", block_id, " out of range [0, ", num_blocks(),
        ")");
  return blocks_[static_cast<std::size_t>(block_id)];
}

}  // namespace servelab
