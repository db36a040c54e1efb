// SPDX-License-Identifier: MIT
#include "kv/contiguous_allocator.h"

#include <algorithm>

#include "core/error.h"

namespace servelab {

ContiguousAllocator::ContiguousAllocator(long capacity) : capacity_(capacity) {
  check(capacity >= 1, "contiguous allocator: capacity must be >= 1 token, got ", capacity);
}

std::optional<long> ContiguousAllocator::allocate(long tokens) {
  check(tokens >= 1, "contiguous allocator: a run needs at least 1 token, got ", tokens);
  long start = 0;  // first position after the previous run
  for (const auto& [offset, length] : used_) {
    if (offset - start >= tokens) {  // the gap before this run is long enough
      used_.emplace(start, tokens);
      return start;
    }
    start = offset + length;
  }
  if (capacity_ - start < tokens) return std::nullopt;
  used_.emplace(start, tokens);
  return start;
}

void ContiguousAllocator::free(long offset) {
  check(used_.erase(offset) == 1, "contiguous allocator: no run starts at ", offset);
}

long ContiguousAllocator::free_tokens() const {
  long used = 0;
  for (const auto& [offset, length] : used_) used += length;
  return capacity_ - used;
}

long ContiguousAllocator::largest_free_run() const {
  long best = 0, start = 0;
  for (const auto& [offset, length] : used_) {
    best = std::max(best, offset - start);
    start = offset + length;
  }
  return std::max(best, capacity_ - start);
}

}  // namespace servelab
