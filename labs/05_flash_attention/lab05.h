// SPDX-License-Identifier: MIT
/**
 * @file lab05.h
 * @brief Lab 05's kernel tables (kernels.cpp), one function each; main.cpp
 *        parses the flags, runs lab 04's serving check with flash on, and
 *        prints the verdict.
 * @see labs/05_flash_attention/README.md
 */
#pragma once

#include <string>
#include <vector>

#include "kernels/attention.h"
#include "lab.h"

namespace servelab::lab05 {

using lab::LabOptions;
using lab::Table;

/// What every kernel table runs on: one layer's head shape, the threads, and the fast memory M.
struct Bench {
  const LabOptions& options;  ///< --seed, --warmup, --repeats
  AttentionShape shape;       ///< the --preset's heads
  std::string model_name;     ///< the --preset's name, for the titles
  KernelContext fast;         ///< every thread of the pool
  KernelContext alone;        ///< one thread
  double fast_memory = 0;     ///< M, bytes: the L2 per core, which the byte counts and the paper's forms use
};

/// Table 1 (printed), its plot tables, and the numbers the verdict quotes.
struct Prefill {
  Table table{}, time{}, bytes{};
  double v1_4096_ms = 0, v2_4096_ms = 0, v3_4096_ms = 0;  ///< v1, v2, v3 at L = 4,096 (0 when not run)
  double bytes_ratio_4096 = 0;                            ///< v1's counted bytes over v3's at L = 4,096
};

/// 1. Prefill: causal attention of L new tokens, every version: time, bytes through main memory and the
///    paper's forms, so the byte count explains the time. Versions that fail validation are added to @p failed.
Prefill prefill_tables(const Bench& bench, const std::vector<int>& lengths, int max_v0_len,
                       std::vector<std::string>& failed);

/// 2. Head shapes of the presets at one L: blocked against flash, where flash's tiles pay and where not.
Table head_shapes(const Bench& bench, int shapes_len);

/// Table 3 (printed), its plot table, and split-K's gain at the longest context.
struct Decode {
  Table table{}, time{};
  double split_gain_longest = 0;  ///< one pass on one thread over split-K, at contexts.back()
};

/// 3. Decode: one query token against a long cache, with and without split-K: one pass leaves threads idle.
Decode decode_tables(const Bench& bench, const std::vector<int>& contexts, std::vector<std::string>& failed);

}  // namespace servelab::lab05
