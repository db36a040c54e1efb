// SPDX-License-Identifier: MIT
/**
 * @file block_table.h
 * @brief One request's logical → physical block map (vLLM: BlockTable).
 * @verbatim
 *  block_size 4, table [7, 2, 5]:
 *    logical token:   0 1 2 3 | 4 5 6 7 | 8 9
 *    physical block:  7       | 2       | 5
 *    slot (row):      28..31  | 8..11   | 20 21      slot = table[t / 4] * 4 + t % 4
 * @endverbatim
 */
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace servelab {

/// The blocks a request holds, in logical order.
class BlockTable {
 public:
  /// An empty table for blocks of @p block_size tokens.
  explicit BlockTable(int block_size) : block_size_(block_size) {}

  /// Adds blocks at the end (a growing sequence takes new blocks as it crosses block edges).
  void append(std::span<const std::int32_t> block_ids) {
    block_ids_.insert(block_ids_.end(), block_ids.begin(), block_ids.end());
  }
  /// Forgets every block (their references go back to the BlockPool separately).
  void clear() { block_ids_.clear(); }
  /// Physical block ids, logical order.
  const std::vector<std::int32_t>& block_ids() const { return block_ids_; }
  /// Blocks held.
  int num_blocks() const { return static_cast<int>(block_ids_.size()); }
  /// Tokens the blocks can hold.
  int capacity() const { return num_blocks() * block_size_; }
  /// Tokens per block.
  int block_size() const { return block_size_; }
  /// Physical slot (row of the [num_blocks * block_size] storage) of logical token @p t < capacity().
  std::int64_t slot(int t) const {
    return static_cast<std::int64_t>(block_ids_[static_cast<std::size_t>(t / block_size_)]) * block_size_ +
           t % block_size_;
  }

 private:
  int block_size_;
  std::vector<std::int32_t> block_ids_;
};

}  // namespace servelab
