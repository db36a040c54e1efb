// SPDX-License-Identifier: MIT
#include "kernels/attention_traffic.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <unistd.h>

namespace servelab {

namespace {

constexpr double kF = sizeof(float);

/// Block-table reads of one pass over @p keys keys (v5): one 4-byte entry per block.
double table_bytes(const AttentionProblem& p, double keys) {
  return p.block_size > 0 ? 4.0 * std::ceil(keys / p.block_size) : 0.0;
}

}  // namespace

AttentionTraffic attention_traffic(AttentionVersion version, const AttentionProblem& p, double M) {
  const double H = p.shape.num_heads, D = p.shape.head_dim, KVH = p.shape.num_kv_heads, group = H / KVH;
  const int n = p.num_new_tokens, c = p.num_computed_tokens;
  const double keys_total = c + n;
  AttentionTraffic t;
  double pairs = 0;  // visible (query, key) pairs per head
  for (int i = 0; i < n; ++i) pairs += c + i + 1;
  t.flops = 4.0 * D * pairs * H;
  // Calls f(rows, keys) for each block of `block` queries, its keys stopping at the block's last query.
  const auto for_each_block = [&](int block, auto&& f) {
    for (int i = 0; i < n; i += block) f(static_cast<double>(std::min(block, n - i)), c + std::min(n, i + block));
  };
  // Pairs a version computes when its blocks of `block` queries each stop at their last query's key.
  const auto block_pairs = [&](int block) {
    double computed = 0;
    for_each_block(block, [&](double rows, double keys) { computed += rows * keys; });
    return computed;
  };
  const double q_and_o = 2.0 * n * H * D * kF;  // every version reads Q and writes O once
  switch (version) {
    case AttentionVersion::REFERENCE:
      // Each (query, head) reads K and V of its visible keys; its score row stays in cache.
      t.bytes = q_and_o + 2.0 * D * kF * pairs * H;
      t.flops_done = t.flops;
      t.assumes = "one row of scores (p + 1 floats) per thread";
      break;
    case AttentionVersion::STANDARD:
      // Per head: K and V once (the sgemms pack them), S written, read and written as P, P read: 4 n·keys.
      t.bytes = q_and_o + H * (2.0 * keys_total * D * kF + 4.0 * n * keys_total * kF);
      t.flops_done = 4.0 * D * n * keys_total * H;
      t.assumes = "one row of S while the softmax runs over it; Q, K, V packed once by each sgemm";
      break;
    case AttentionVersion::STANDARD_CAUSAL:
      // Per (query tile, head): K and V up to the tile's last query, and 4 floats per computed pair of S and P.
      t.bytes = q_and_o;
      for_each_block(kFlashQueryTile,
                     [&](double rows, double keys) { t.bytes += H * (2.0 * keys * D * kF + 4.0 * rows * keys * kF); });
      t.flops_done = 4.0 * D * block_pairs(kFlashQueryTile) * H;
      t.assumes = "one row of S while the softmax runs over it; each tile's K and V packed once by its sgemm";
      break;
    case AttentionVersion::BLOCKED:
      // Per (query block of 64, head): K and V up to the block's last query; the 64 × keys slab spills past M.
      t.bytes = q_and_o;
      for_each_block(kBlockedQueryBlock, [&](double rows, double keys) {
        t.bytes += H * (2.0 * keys * D * kF + table_bytes(p, keys));
        if (rows * keys * kF >= M) t.bytes += H * 4.0 * rows * keys * kF;
      });
      t.flops_done = 4.0 * D * block_pairs(kBlockedQueryBlock) * H;
      t.assumes = "the 64 × keys slab of S while it fits in M, written and read 4 times when it does not";
      break;
    case AttentionVersion::FLASH:
      // Per (query tile, head): K and V up to the tile's last query, once; S and P stay in the tile.
      t.bytes = q_and_o;
      for_each_block(kFlashQueryTile,
                     [&](double, double keys) { t.bytes += H * (2.0 * keys * D * kF + table_bytes(p, keys)); });
      t.flops_done = 4.0 * D * block_pairs(kFlashQueryTile) * H;
      t.assumes = "a " + std::to_string(kFlashQueryTile) + " × d tile of Q and Õ and a " +
                  std::to_string(kFlashQueryTile) + " × " + std::to_string(kFlashKeyTile) + " tile of S";
      break;
    case AttentionVersion::SPLIT_K: {
      // Per (KV head, piece): K and V of the piece once for the whole GQA group; each piece writes and the merge
      // reads its (m, l, Õ) per row.
      const double pieces = std::max(1, p.num_splits);
      t.bytes = q_and_o + KVH * (2.0 * keys_total * D * kF + pieces * table_bytes(p, keys_total / pieces)) +
                2.0 * pieces * n * group * KVH * (D + 2) * kF;
      if (pieces > 1) t.bytes += (pieces - 1) * n * H * D * kF;  // every piece but the first reads the group's Q again
      t.flops_done = 4.0 * D * n * keys_total * H;  // every row of the group against every key of its pieces
      t.assumes = "one piece's tile of the group's rows (" + std::to_string(static_cast<int>(group)) + " × d)";
      break;
    }
  }
  return t;
}

double paper_standard_bytes(const AttentionProblem& p) {
  const double N = p.num_computed_tokens + p.num_new_tokens, d = p.shape.head_dim;
  return p.shape.num_heads * (N * d + N * N) * kF;
}

double paper_flash_bytes(const AttentionProblem& p, double fast_memory_bytes) {
  const double N = p.num_computed_tokens + p.num_new_tokens, d = p.shape.head_dim, M = fast_memory_bytes / kF;
  return p.shape.num_heads * (N * N * d * d / M) * kF;
}

double cpu_fast_memory_bytes() {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index2/size");
  double size = 0;
  if (f >> size) {
    if (f.peek() == 'K') size *= 1024;
    if (f.peek() == 'M') size *= 1024 * 1024;
  }
#ifdef _SC_LEVEL2_CACHE_SIZE
  if (!(size > 0)) size = static_cast<double>(sysconf(_SC_LEVEL2_CACHE_SIZE));
#endif
  return size > 0 ? size : 1024.0 * 1024.0;
}

int blocked_crossover_length(double fast_memory_bytes) {
  return static_cast<int>(std::ceil(fast_memory_bytes / (kBlockedQueryBlock * kF)));
}

const char* version_name(AttentionVersion v) {
  switch (v) {
    case AttentionVersion::REFERENCE: return "v0 reference";
    case AttentionVersion::STANDARD: return "v1 standard";
    case AttentionVersion::STANDARD_CAUSAL: return "v1 standard, causal";
    case AttentionVersion::BLOCKED: return "v2 blocked";
    case AttentionVersion::FLASH: return "v3 flash";
    case AttentionVersion::SPLIT_K: return "v4 split-K";
  }
  return "?";
}

}  // namespace servelab
