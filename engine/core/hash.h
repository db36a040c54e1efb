// SPDX-License-Identifier: MIT
/**
 * @file hash.h
 * @brief FNV-1a hashing: names of synthetic tensors, and the short hash of
 *        generated token ids that runs print so outputs that must agree
 *        visibly agree.
 */
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servelab {

/// 64-bit FNV-1a of @p bytes; pass the previous result as @p h to hash pieces as if they were one string.
inline std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

/// First 8 hex digits of the FNV-1a hash of @p ids (little-endian int32 bytes).
std::string token_hash(const std::vector<std::int32_t>& ids);

}  // namespace servelab
