// SPDX-License-Identifier: MIT
#include "sched/kv_cache_manager.h"

#include <algorithm>
#include <span>

#include "core/error.h"

namespace servelab {

namespace {

int checked_block_size(int block_size) {
  check(block_size >= 1, "--block-size must be >= 1, got ", block_size);
  return block_size;
}

}  // namespace

KVCacheManager::KVCacheManager(int num_blocks, int block_size, bool enable_caching)
    : block_size_(checked_block_size(block_size)), pool_(num_blocks, enable_caching), empty_(block_size) {}

int KVCacheManager::num_blocks_for(long num_tokens) const {
  return static_cast<int>((num_tokens + block_size_ - 1) / block_size_);
}

std::optional<std::vector<std::int32_t>> KVCacheManager::allocate_slots(const Request& request, int num_new_tokens) {
  check(num_new_tokens >= 0, "allocate_slots: num_new_tokens must be >= 0, got ", num_new_tokens);
  // BEGIN LAB04 SOLUTION: KVCacheManager::allocate_slots, top the table up to the blocks the tokens need, or nothing
  const auto it = tables_.find(request.request_id);
  const int held = it == tables_.end() ? 0 : it->second.num_blocks();
  const int needed = num_blocks_for(static_cast<long>(request.num_computed_tokens) + num_new_tokens) - held;
  if (needed <= 0) return std::vector<std::int32_t>{};
  if (needed > pool_.num_free_blocks()) return std::nullopt;
  std::vector<std::int32_t> blocks = pool_.get_new_blocks(needed);
  tables_.try_emplace(request.request_id, block_size_).first->second.append(blocks);
  return blocks;
  // END LAB04 SOLUTION
}

const std::vector<BlockHash>& KVCacheManager::block_hashes(const Request& request) {
  std::vector<BlockHash>& known = block_hashes_[request.request_id];
  known = hash_full_blocks(request.all_token_ids(), block_size_, std::move(known));
  return known;
}

KVCacheManager::ComputedBlocks KVCacheManager::get_computed_blocks(const Request& request) {
  ComputedBlocks hit;
  if (!enable_caching() || request.num_computed_tokens > 0 || tables_.contains(request.request_id)) return hit;
  [[maybe_unused]] const std::vector<BlockHash>& hashes =
      block_hashes(request);  // a starter tree stubs the region that reads it
  // BEGIN LAB04 SOLUTION: KVCacheManager::get_computed_blocks, the longest cached run of leading full blocks, short of the last token
  const std::size_t most = static_cast<std::size_t>((request.num_tokens() - 1) / block_size_);
  for (std::size_t i = 0; i < hashes.size() && i < most; ++i) {
    const std::optional<std::int32_t> block = pool_.get_cached_block(hashes[i]);
    if (!block) break;
    hit.blocks.push_back(*block);
  }
  hit.num_tokens = static_cast<int>(hit.blocks.size()) * block_size_;
  // END LAB04 SOLUTION
  return hit;
}

std::optional<std::vector<std::int32_t>> KVCacheManager::allocate_slots(const Request& request, int num_new_tokens,
                                                                        const ComputedBlocks& computed) {
  // A fresh admission: what it has computed is the cached prefix, and it holds no block yet.
  const bool fresh = request.num_computed_tokens == computed.num_tokens && !tables_.contains(request.request_id);
  check(fresh || computed.blocks.empty(), "allocate_slots: request ", request.request_id,
        " shares a cached prefix only at admission, with num_computed_tokens at the prefix's end");
  // BEGIN LAB04 SOLUTION: KVCacheManager::allocate_slots with a cached prefix, share its blocks then top up
  if (!computed.blocks.empty()) {
    // A shared block that is free now leaves the free queue: it no longer counts as room.
    const auto evictable = std::count_if(computed.blocks.begin(), computed.blocks.end(),
                                         [&](std::int32_t id) { return pool_.block(id).ref_cnt == 0; });
    const int needed = num_blocks_for(static_cast<long>(request.num_computed_tokens) + num_new_tokens) -
                       static_cast<int>(computed.blocks.size());
    if (needed + evictable > pool_.num_free_blocks()) return std::nullopt;
    pool_.touch(computed.blocks);
    tables_.try_emplace(request.request_id, block_size_).first->second.append(computed.blocks);
    num_cached_[request.request_id] = static_cast<int>(computed.blocks.size());
  }
  // END LAB04 SOLUTION
  std::optional<std::vector<std::int32_t>> blocks = allocate_slots(request, num_new_tokens);
  if (!blocks) return std::nullopt;  // only without a hit: with one, the room was checked above
  if (enable_caching() && fresh) {
    queries_ += request.num_tokens();
    hits_ += computed.num_tokens;
  }
  return blocks;
}

void KVCacheManager::free(const Request& request) {
  block_hashes_.erase(request.request_id);
  num_cached_.erase(request.request_id);
  if (enable_caching()) {
    const auto it = tables_.find(request.request_id);
    if (it == tables_.end()) return;
    // BEGIN LAB04 SOLUTION: KVCacheManager::free with prefix caching, tail first
    // The tail joins the free queue first and is evicted first: a shared prefix's blocks, at the
    // head of every request that uses them, stay cached longest.
    const std::vector<std::int32_t> tail_first(it->second.block_ids().rbegin(), it->second.block_ids().rend());
    pool_.free_blocks(tail_first);
    // END LAB04 SOLUTION
    tables_.erase(it);
    return;
  }
  // BEGIN LAB04 SOLUTION: KVCacheManager::free, every block back to the pool, the table forgotten
  const auto it = tables_.find(request.request_id);
  if (it == tables_.end()) return;
  pool_.free_blocks(it->second.block_ids());
  tables_.erase(it);
  // END LAB04 SOLUTION
}

void KVCacheManager::cache_blocks(const Request& request) {
  if (!enable_caching()) return;
  const auto it = tables_.find(request.request_id);
  if (it == tables_.end()) return;
  [[maybe_unused]] const std::vector<BlockHash>& hashes =
      block_hashes(request);  // a starter tree stubs the region that reads it
  // BEGIN LAB04 SOLUTION: KVCacheManager::cache_blocks, publish the blocks that are full and computed
  const int full = std::min(request.num_computed_tokens / block_size_, it->second.num_blocks());
  int& done = num_cached_[request.request_id];
  if (full <= done) return;
  const std::span<const std::int32_t> ids(it->second.block_ids());
  pool_.cache_full_blocks(
      ids.subspan(static_cast<std::size_t>(done), static_cast<std::size_t>(full - done)),
      std::span(hashes).subspan(static_cast<std::size_t>(done), static_cast<std::size_t>(full - done)));
  done = full;
  // END LAB04 SOLUTION
}

const BlockTable& KVCacheManager::block_table(int request_id) const {
  const auto it = tables_.find(request_id);
  return it == tables_.end() ? empty_ : it->second;
}

}  // namespace servelab
