// SPDX-License-Identifier: MIT
/**
 * @file limits.h
 * @brief The bounds every workload reader checks before it allocates: a flag,
 *        a JSONL line or a trace file can ask for no more than these.
 */
#pragma once

#include <cstdint>

namespace servelab {

/// Longest prompt or output a workload may ask for, in tokens; checked before any allocation.
inline constexpr int kMaxWorkloadTokens = 1 << 20;
/// Most requests one workload may hold; checked before the request vector is reserved.
inline constexpr int kMaxWorkloadRequests = 1'000'000;
/// Largest workload or trace file read, in bytes; checked before the file is read.
inline constexpr std::int64_t kMaxWorkloadFileBytes = std::int64_t{256} << 20;
/// Deepest JSON nesting a workload line may have (a line is depth 1, its prompt_ids array depth 2).
inline constexpr int kMaxWorkloadJsonDepth = 4;

}  // namespace servelab
