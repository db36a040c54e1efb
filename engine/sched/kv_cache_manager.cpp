// SPDX-License-Identifier: MIT
#include "sched/kv_cache_manager.h"

#include "core/error.h"

namespace servelab {

namespace {

int checked_block_size(int block_size) {
  check(block_size >= 1, "--block-size must be >= 1, got ", block_size);
  return block_size;
}

}  // namespace

KVCacheManager::KVCacheManager(int num_blocks, int block_size)
    : block_size_(checked_block_size(block_size)), pool_(num_blocks), empty_(block_size) {}

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

void KVCacheManager::free(const Request& request) {
  // BEGIN LAB04 SOLUTION: KVCacheManager::free, every block back to the pool, the table forgotten
  const auto it = tables_.find(request.request_id);
  if (it == tables_.end()) return;
  pool_.free_blocks(it->second.block_ids());
  tables_.erase(it);
  // END LAB04 SOLUTION
}

const BlockTable& KVCacheManager::block_table(int request_id) const {
  const auto it = tables_.find(request_id);
  return it == tables_.end() ? empty_ : it->second;
}

}  // namespace servelab
