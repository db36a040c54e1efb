// SPDX-License-Identifier: MIT
/**
 * @file attention_v5_paged.h
 * @brief Lab 05's v5, paged flash attention: v3 and v4 reading K and V
 *        through lab 04's block table, at no extra cost.
 *
 * What changed from v3/v4: nothing in the math. A key tile is a run of
 * logical tokens; on a paged cache its rows are contiguous only inside one
 * block, so the tile is walked as runs that stop at block edges, and each
 * run is one strided matrix for the tile's sgemm (or one loop of rows).
 * @verbatim
 *  key tile [t0, t0 + 64), block_size 16:
 *   logical  | t0 .. t0+15 | t0+16 .. t0+31 | t0+32 .. | t0+48 .. |
 *   physical | block 7     | block 2        | block 9  | block 4  |   4 runs, 4 row pointers
 * @endverbatim
 * The bottleneck removed: none; lab 04's paging is kept without copying
 * K/V into a contiguous buffer first. The cost left: one block-table entry
 * (4 bytes) read per block per pass over the keys, and sgemms four times
 * narrower when blocks are 16 tokens. Deterministic mode adds nothing to
 * round: its per-row loops visit the same keys in the same order either way.
 * @see labs/05_flash_attention/README.md
 */
#pragma once

#include <algorithm>

#include "kv/kv_view.h"

namespace servelab {

/**
 * @brief Calls `fn(t, run)` for consecutive runs covering logical tokens
 *        [first, first + count), each run contiguous in @p kv's rows
 *        (cut at block edges when @p kv is paged; one run otherwise).
 */
template <typename Fn>
void for_each_contiguous_run(const KVView& kv, int first, int count, Fn fn) {
  int t = first;
  while (t < first + count) {
    int run = first + count - t;
    if (kv.block_table != nullptr) run = std::min(run, kv.block_size - t % kv.block_size);
    fn(t, run);
    t += run;
  }
}

}  // namespace servelab
