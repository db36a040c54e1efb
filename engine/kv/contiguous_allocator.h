// SPDX-License-Identifier: MIT
/**
 * @file contiguous_allocator.h
 * @brief KV memory as one line of token positions handed out in contiguous
 *        runs, first fit: how serving engines placed KV before paging, and
 *        why it fragments (the KV cache article, §4-1; docs/sources.md).
 * @verbatim
 *  capacity 6,200:  [A 100][B 1,000][C 5,000][free 100]
 *  B finishes:      [A 100][free 1,000][C 5,000][free 100]   1,100 tokens free
 *  D needs 1,050:   no run of 1,050 free positions: refused, though 1,100 are free
 * @endverbatim
 * Paging removes the problem: any free block will do, so D would get
 * ceil(1,050 / block_size) blocks wherever they are.
 */
#pragma once

#include <map>
#include <optional>

namespace servelab {

/// First-fit allocation of contiguous runs of token positions.
class ContiguousAllocator {
 public:
  /// @throws Error when @p capacity < 1.
  explicit ContiguousAllocator(long capacity);

  /// The first free run of @p tokens positions, lowest offset first; nothing when no run is long enough.
  std::optional<long> allocate(long tokens);
  /// Frees the run that starts at @p offset. @throws Error when no run starts there.
  void free(long offset);

  /// Positions not in any run.
  long free_tokens() const;
  /// Longest run of free positions: the largest request that fits now.
  long largest_free_run() const;
  /// Positions in all.
  long capacity() const { return capacity_; }

 private:
  long capacity_;
  std::map<long, long> used_;  // offset -> length of each allocated run
};

}  // namespace servelab
