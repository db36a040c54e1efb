// SPDX-License-Identifier: MIT
/**
 * @file lab05.h
 * @brief Lab 05's kernel tables (kernels.cpp), one function each, and its
 *        checked claims (claims.cpp); main.cpp parses the flags, runs lab
 *        04's serving check with flash on, and prints the verdict.
 * @see labs/05_flash_attention/README.md
 */
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_traffic.h"
#include "lab.h"
#include "report.h"

namespace servelab::lab05 {

using namespace servelab::lab;

/// What every kernel table runs on: one layer's head shape, the threads, and the fast memory M.
struct Bench {
  const LabOptions& options;  ///< --seed, --warmup, --repeats
  AttentionShape shape;       ///< the --preset's heads
  std::string model_name;     ///< the --preset's name, for the titles
  KernelContext fast;         ///< every thread of the pool
  KernelContext alone;        ///< one thread
  double fast_memory = 0;     ///< M, bytes: the L2 per core, which the byte counts and the paper's forms use
};

/// One version at one length: its median time (0 = not timed), what it moves and computes, its error vs v0.
struct Measured {
  double ms = 0;               ///< median time, milliseconds; 0 when not timed (v0 past --max-v0-length)
  AttentionTraffic traffic{};  ///< counted bytes and FLOPs (attention_traffic())
  double max_error = 0;        ///< largest |version - v0|
};

/// One prefill length: every version that passed validation, by its table name ("v3 flash", ...).
struct PrefillPoint {
  int length = 0;                             ///< L
  std::map<std::string, Measured> version{};  ///< keyed by the names prefill_tables() prints
};

/// Table 1 (printed), its plot tables, and what the claims are decided on.
struct Prefill {
  Table table{}, time{}, bytes{};
  std::vector<PrefillPoint> points{};  ///< one per --lengths entry, in order
};

/// 1. Prefill: causal attention of L new tokens, every version: time, FLOPs executed, bytes through main memory
///    and the paper's forms, so equal work can be seen to be equal and the bytes explain the time. Versions that
///    fail validation are added to @p failed.
Prefill prefill_tables(const Bench& bench, const std::vector<int>& lengths, int max_v0_len,
                       std::vector<std::string>& failed);

/// One length of the crossover table: blocked and flash on one head.
struct CrossoverPoint {
  int length = 0;       ///< L
  Measured v2{}, v3{};  ///< blocked and flash
};

/// Table 2 and its points: v2 against v3 on one head around the crossover length L*.
struct Crossover {
  Table table{};
  int crossover_length = 0;              ///< L* = M / (64 · 4 B), blocked_crossover_length()
  int num_heads = 1;                     ///< query heads of the table's shape (one KV head)
  std::vector<CrossoverPoint> points{};  ///< empty when the run measured none (--quick)
};

/// 2. Crossover: blocked (v2) against flash (v3) on one head at @p lengths, where v2's 64 × L slab stops fitting in
///    M. Validated against each other (v2 is checked against v0 in table 1); a mismatch is added to @p failed.
Crossover crossover_table(const Bench& bench, const std::vector<int>& lengths, std::vector<std::string>& failed);

/// 3. Head shapes of the presets at one L: blocked against flash, where flash's tiles pay and where not.
Table head_shapes(const Bench& bench, int shapes_len);

/// One decode context: one pass on one thread and on every thread, split-K on every thread.
struct DecodePoint {
  int context = 0;               ///< keys in the cache
  int threads = 1;               ///< threads of the pool
  int pieces = 1;                ///< split-K's pieces (split_k_pieces())
  Measured one_pass_alone{};     ///< v4 one pass, one thread
  Measured one_pass{}, split{};  ///< v4 one pass and split-K, every thread (ms is in milliseconds here too)
};

/// Table 4 (printed), its plot table, and the points.
struct Decode {
  Table table{}, time{};
  std::vector<DecodePoint> points{};  ///< one per context, in order
};

/// 4. Decode: one query token against a long cache, with and without split-K, on the same threads.
Decode decode_tables(const Bench& bench, const std::vector<int>& contexts, std::vector<std::string>& failed);

/// @p t_new over @p t_base as "0.68× (faster)" or "1.16× (slower)"; "-" when either is not a positive time.
std::string time_ratio(double t_new, double t_base);

/// What the serving check found: the two tokens hashes, blocked's first.
struct ServingResult {
  Table table{};
  std::string blocked_hash{}, flash_hash{};  ///< tokens hashes of the two runs
};

/**
 * @brief Records each of the chapter's claims with Report::claim(), decided on this run's numbers, and returns the
 *        one-line verdict.
 * @param failed versions that failed validation (empty when all matched v0).
 */
std::string check_claims(Report& report, const Bench& bench, const Prefill& prefill, const Crossover& crossover,
                         const Decode& decode, const ServingResult& serving, const std::vector<std::string>& failed);

}  // namespace servelab::lab05
