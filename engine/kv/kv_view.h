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

  /**
   * @brief Physical row of logical token @p t (t >= 0, within the sequence).
   *
   * Contiguous (block_table null): row t. Paged: token t lives in the
   * sequence's logical block t / block_size, which is physical block
   * block_table[t / block_size], at offset t % block_size inside it; rows of
   * a block are consecutive, so the row is that block id · block_size + the
   * offset. Runs in CUDA kernels too: no allocation, no exception.
   */
  SERVELAB_HD std::size_t row(int t) const {
    if (block_table == nullptr) return static_cast<std::size_t>(t);
    // BEGIN LAB04 SOLUTION: KVView::row, the block-table lookup of a paged sequence's token
    return static_cast<std::size_t>(block_table[t / block_size]) * block_size + t % block_size;
    // END LAB04 SOLUTION
  }
  /// Key row of token @p t: [kv_dim] floats.
  SERVELAB_HD float* key(int t) const { return k + row(t) * row_stride; }
  /// Value row of token @p t: [kv_dim] floats.
  SERVELAB_HD float* value(int t) const { return v + row(t) * row_stride; }
};

}  // namespace servelab
