// SPDX-License-Identifier: MIT
/**
 * @file kv_view.h
 * @brief How attention finds token t of a sequence in a KV cache.
 *
 * Attention never assumes a sequence's K/V rows are contiguous beyond one
 * block. A contiguous cache is the special case of one block per sequence
 * (no block table); a paged cache maps logical block t / block_size to a
 * physical block through the block table.
 * @verbatim
 *  logical token t -> block_table[t / block_size] * block_size + t % block_size
 *                     (row index into k / v, each row kv_dim floats)
 * @endverbatim
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/hd.h"

namespace servelab {

/// One layer's K and V rows for one sequence.
struct KVView {
  float* k = nullptr;                         ///< [rows, row_stride] keys, heads concatenated per row
  float* v = nullptr;                         ///< [rows, row_stride] values
  std::size_t row_stride = 0;                 ///< floats between consecutive rows (>= kv_dim)
  const std::int32_t* block_table = nullptr;  ///< [num_blocks] physical block ids; null = contiguous
  int block_size = 0;                         ///< tokens per block when block_table is set

  /// Physical row of logical token @p t.
  SERVELAB_HD std::size_t row(int t) const {
    if (block_table == nullptr) return static_cast<std::size_t>(t);
    return static_cast<std::size_t>(block_table[t / block_size]) * block_size + t % block_size;
  }
  /// Key row of token @p t: [kv_dim] floats.
  SERVELAB_HD float* key(int t) const { return k + row(t) * row_stride; }
  /// Value row of token @p t: [kv_dim] floats.
  SERVELAB_HD float* value(int t) const { return v + row(t) * row_stride; }
};

}  // namespace servelab
