// SPDX-License-Identifier: MIT
/**
 * @file kv_transfer_plan.h
 * @brief Which bytes of a request's KV move where: one descriptor per
 *        (layer, K or V, block), then contiguous runs merged.
 *
 * Each worker registers its KV cache as two regions, all layers' K blocks and
 * all layers' V blocks (engine/kv/kv_cache.h's layout):
 * @verbatim
 *  region 0 (K): [num_layers][num_blocks][block_size][kv_dim] f32     region 1 (V): the same
 *  byte offset of (layer, block, token) = ((layer * num_blocks + block) * block_size + token) * kv_dim * 4
 *
 *  src blocks [4, 5, 6, 9]  dst blocks [0, 1, 2, 3]  -> per layer and K/V: runs [4..6 -> 0..2], [9 -> 3]
 * @endverbatim
 * Blocks i and i+1 of a request merge into one descriptor when both the
 * source ids and the destination ids are consecutive (SGLang's
 * group_concurrent_contiguous): on TCP a 64 KiB message runs at a third of
 * an 8 MiB one's rate. The last block moves only the rows the prompt filled,
 * so the bytes are exactly \f$2 \cdot layers \cdot kv\_dim \cdot tokens \cdot 4\f$.
 * @see labs/07_disaggregation/README.md
 */
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "disagg/transport.h"
#include "kv/kv_cache.h"

namespace servelab::disagg {

/// A KV cache's shape as its peers need it (sent in the worker's registration).
struct KVLayout {
  int num_layers = 0;   ///< decoder layers
  int num_blocks = 0;   ///< blocks per layer in this worker's cache
  int block_size = 0;   ///< tokens per block
  int kv_dim = 0;       ///< floats per token per layer, K or V: num_kv_heads * head_dim
  int dtype_bytes = 4;  ///< bytes per element (f32)

  /// Bytes of one token's K (or V) in one layer.
  std::uint64_t row_bytes() const {
    return static_cast<std::uint64_t>(kv_dim) * static_cast<std::uint64_t>(dtype_bytes);
  }
  /// True when K/V rows of the two layouts can be copied byte for byte (block counts may differ).
  bool compatible(const KVLayout& other) const {
    return num_layers == other.num_layers && block_size == other.block_size && kv_dim == other.kv_dim &&
           dtype_bytes == other.dtype_bytes;
  }
};

/// The layout of @p cache.
KVLayout kv_layout_of(const KVCache& cache);

/// Registers @p cache's K blocks (region 0) and V blocks (region 1) with @p transport, once.
void register_kv_cache(Transport& transport, KVCache& cache);

/// A request's KV transfer, ready for Transport::write/read/send.
struct TransferPlan {
  std::vector<TransferDescriptor> descriptors;  ///< after merging contiguous runs
  std::int64_t num_uncoalesced = 0;             ///< descriptors before merging: 2 * layers * blocks
  std::uint64_t bytes = 0;                      ///< sum of the descriptors' lengths
};

/**
 * @brief The descriptors that move the first @p num_tokens tokens of layers
 *        [@p first_layer, @p end_layer) from @p src_blocks (local) to @p dst_blocks (the peer's).
 *
 * Order: layer by layer, K (region 0) before V (region 1), blocks in table
 * order. Block i joins the run of block i-1 when src_blocks[i] == src_blocks[i-1] + 1
 * and dst_blocks[i] == dst_blocks[i-1] + 1; a run's descriptor starts at row 0
 * of its first block on each side (offsets as in the file comment) and is
 * tokens × row_bytes() long, where the run's last block counts only the rows
 * below @p num_tokens. num_uncoalesced is 2 × layers × blocks; bytes is the sum
 * of the lengths, so exactly 2 × layers × num_tokens × row_bytes(). An empty
 * layer range gives an empty plan.
 * @throws Error when the layouts are not compatible, a block table is too short
 *         for @p num_tokens or holds an id outside its cache, num_tokens < 1, or
 *         the layer range is out of bounds.
 */
TransferPlan plan_transfer(const KVLayout& src, std::span<const std::int32_t> src_blocks, const KVLayout& dst,
                           std::span<const std::int32_t> dst_blocks, int num_tokens, int first_layer, int end_layer);

/**
 * @brief FNV-1a over the request's K and V rows (layer by layer, K then V,
 *        token by token): equal on both sides when the move was exact.
 * @throws Error when @p blocks is too short for @p num_tokens.
 */
std::uint64_t kv_checksum(KVCache& cache, std::span<const std::int32_t> blocks, int num_tokens);

}  // namespace servelab::disagg
