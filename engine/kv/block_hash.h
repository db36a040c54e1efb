// SPDX-License-Identifier: MIT
/**
 * @file block_hash.h
 * @brief The hash that names a full KV block's contents for prefix caching
 *        (vLLM v1: hash_block_tokens, BlockHash).
 *
 * A block's K/V depend on every token before it, not only on its own, so a
 * block's hash chains its parent's: two requests share block i only when
 * their first (i + 1) * block_size tokens agree.
 * @verbatim
 *  block_size 4:   tokens  [5 6 7 8 | 1 2 3 4 | 9]
 *                  hash    h0 = H(root, 5 6 7 8)
 *                          h1 = H(h0,   1 2 3 4)
 *                          (the partial block [9] has no hash: it can still change)
 * @endverbatim
 */
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace servelab {

/// A full block's content hash: 64-bit FNV-1a over its parent's hash and its token ids.
using BlockHash = std::uint64_t;

/// The parent hash of a sequence's first block.
inline constexpr BlockHash kRootBlockHash = 0xcbf29ce484222325ull;

/**
 * @brief Hash of one full block, chained on the block before it.
 * @param parent the previous block's hash; kRootBlockHash for the first block.
 * @param tokens the block's token ids (block_size of them).
 */
BlockHash hash_block_tokens(BlockHash parent, std::span<const std::int32_t> tokens);

/**
 * @brief Hashes of every full block of @p tokens, in order: the first
 *        tokens.size() / block_size blocks; a partial last block gets none.
 * @param tokens a sequence's token ids (prompt, then output).
 * @param block_size tokens per block, >= 1.
 * @param known hashes already computed for a prefix of the same tokens; they are kept and the rest appended.
 */
std::vector<BlockHash> hash_full_blocks(std::span<const std::int32_t> tokens, int block_size,
                                        std::vector<BlockHash> known = {});

}  // namespace servelab
