// SPDX-License-Identifier: MIT
/**
 * @file attention_traffic.h
 * @brief The bytes each attention version moves to and from main memory,
 *        counted from its own loops and tile sizes, beside the closed forms
 *        of the FlashAttention paper (Dao et al. 2022, Theorem 2).
 *
 * "Main memory" is DRAM on the CPU and HBM on a GPU; "fast memory" M is
 * what a version may assume keeps a tile or a row between uses (a core's
 * L2 here, shared memory and registers on a GPU). Each count says what it
 * assumes stays in fast memory; everything else is counted once per time
 * the loop touches it.
 * @verbatim
 *  paper, per head, N tokens, head width d, fast memory M floats:
 *    standard attention  Θ(N·d + N²)       (S and P written and read)
 *    flash attention     Θ(N²·d²/M)        (K, V read once per query tile of ~M/d rows)
 * @endverbatim
 * @see labs/05_flash_attention/README.md
 */
#pragma once

#include <string>

#include "kernels/attention.h"

namespace servelab {

/// Lab 05's versions (v5, paged, is v3 or v4 with a block size).
enum class AttentionVersion {
  REFERENCE,        ///< v0 attention_naive()
  STANDARD,         ///< v1 attention_standard(), every pair (StandardWork::FULL_MATRIX)
  STANDARD_CAUSAL,  ///< v1 attention_standard(), masked tiles skipped (StandardWork::SKIP_MASKED): flash's work
  BLOCKED,          ///< v2 attention_blocked()
  FLASH,            ///< v3 attention_flash()
  SPLIT_K,          ///< v4 attention_split_k()
};

/// One sequence's attention call, as the counts see it.
struct AttentionProblem {
  AttentionShape shape;         ///< heads and width
  int num_new_tokens = 0;       ///< queries
  int num_computed_tokens = 0;  ///< keys before the first query
  int block_size = 0;           ///< KV block size when paged (v5), 0 = contiguous
  int num_splits = 1;           ///< v4's pieces
};

/// What one version moves and computes.
struct AttentionTraffic {
  double bytes = 0;     ///< bytes to and from main memory
  double flops = 0;     ///< useful FLOPs: 4·d per visible (query, key) pair and head
  /// FLOPs the loops execute: 4·d per computed (query, key) pair and head, masked pairs inside a computed tile
  /// included (the sgemm path; deterministic mode computes visible pairs only).
  double flops_done = 0;
  std::string assumes;  ///< what the count keeps in fast memory
};

/**
 * @brief Counts @p version on @p problem from its loop structure.
 * @param fast_memory_bytes M: decides whether v2's score slab spills.
 */
AttentionTraffic attention_traffic(AttentionVersion version, const AttentionProblem& problem, double fast_memory_bytes);

/// The paper's standard-attention order, evaluated with constant 1: (N·d + N²) floats per head, in bytes.
double paper_standard_bytes(const AttentionProblem& problem);
/// The paper's flash-attention order, evaluated with constant 1: N²·d²/M floats per head, in bytes (M in floats).
double paper_flash_bytes(const AttentionProblem& problem, double fast_memory_bytes);

/// This machine's per-core L2 in bytes (sysfs index2, else sysconf), 1 MiB when neither can be read.
double cpu_fast_memory_bytes();

/// Rows of v2's query block: its score slab is kBlockedQueryBlock × keys floats.
inline constexpr int kBlockedQueryBlock = 64;

/**
 * @brief The crossover length L* of v2 against fast memory @p fast_memory_bytes:
 *        the L at which v2's longest score slab, kBlockedQueryBlock × L
 *        floats, fills M. From L* on, the slab no longer fits beside the K
 *        and V it streams, so its four passes go to main memory, which flash
 *        never pays.
 * @verbatim
 *   L* = M / (64 · 4 B)      M = 512 KiB → 2,048;  1 MiB → 4,096;  2 MiB → 8,192
 * @endverbatim
 */
int blocked_crossover_length(double fast_memory_bytes);

/// "v0 reference", "v1 standard", ... for tables.
const char* version_name(AttentionVersion version);

}  // namespace servelab
