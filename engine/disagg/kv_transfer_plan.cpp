// SPDX-License-Identifier: MIT
#include "disagg/kv_transfer_plan.h"

#include <algorithm>

#include "core/error.h"
#include "core/hash.h"

namespace servelab::disagg {

namespace {

constexpr int kKeyRegion = 0, kValueRegion = 1;

[[maybe_unused]] std::uint64_t row_offset(const KVLayout& l, int layer, std::int32_t block, int token) {
  return ((static_cast<std::uint64_t>(layer) * static_cast<std::uint64_t>(l.num_blocks) +
           static_cast<std::uint64_t>(block)) *
              static_cast<std::uint64_t>(l.block_size) +
          static_cast<std::uint64_t>(token)) *
         l.row_bytes();
}

void check_table(const KVLayout& l, std::span<const std::int32_t> blocks, int num_tokens, const char* side) {
  check(num_tokens >= 1, "kv transfer: a request needs at least one token, got ", num_tokens);
  const long needed = (static_cast<long>(num_tokens) + l.block_size - 1) / l.block_size;
  check(static_cast<long>(blocks.size()) >= needed, "kv transfer: the ", side, " block table has ", blocks.size(),
        " blocks, ", num_tokens, " tokens need ", needed);
  for (long i = 0; i < needed; ++i)
    check(blocks[static_cast<std::size_t>(i)] >= 0 && blocks[static_cast<std::size_t>(i)] < l.num_blocks,
          "kv transfer: ", side, " block id ", blocks[static_cast<std::size_t>(i)], " is outside [0, ", l.num_blocks,
          ")");
}

}  // namespace

KVLayout kv_layout_of(const KVCache& cache) {
  return {.num_layers = cache.num_layers(),
          .num_blocks = cache.num_blocks(),
          .block_size = cache.block_size(),
          .kv_dim = static_cast<int>(cache.kv_dim()),
          .dtype_bytes = static_cast<int>(sizeof(float))};
}

void register_kv_cache(Transport& transport, KVCache& cache) {
  check(!cache.on_device(), "kv transfer: this UCX build has no CUDA support; the KV cache must be in host memory");
  const std::size_t bytes = cache.bytes_allocated() / 2;  // K or V of every layer
  check(transport.register_memory(cache.key_blocks(0), bytes) == kKeyRegion &&
            transport.register_memory(cache.value_blocks(0), bytes) == kValueRegion,
        "kv transfer: the KV cache must be the transport's first two regions");
}

TransferPlan plan_transfer(const KVLayout& src, std::span<const std::int32_t> src_blocks, const KVLayout& dst,
                           std::span<const std::int32_t> dst_blocks, int num_tokens, int first_layer, int end_layer) {
  check(src.compatible(dst), "kv transfer: KV layouts differ (layers ", src.num_layers, "/", dst.num_layers,
        ", block_size ", src.block_size, "/", dst.block_size, ", kv_dim ", src.kv_dim, "/", dst.kv_dim, ")");
  check(0 <= first_layer && first_layer <= end_layer && end_layer <= src.num_layers, "kv transfer: layers [",
        first_layer, ", ", end_layer, ") outside [0, ", src.num_layers, ")");
  check_table(src, src_blocks, num_tokens, "source");
  check_table(dst, dst_blocks, num_tokens, "destination");
  TransferPlan plan;
  // BEGIN LAB07 SOLUTION: plan_transfer, one descriptor per run of blocks consecutive on both sides, per layer and K or V
  const int num_blocks = (num_tokens + src.block_size - 1) / src.block_size;
  for (int layer = first_layer; layer < end_layer; ++layer)
    for (int region : {kKeyRegion, kValueRegion})
      for (int first = 0; first < num_blocks;) {
        int end = first + 1;
        while (end < num_blocks &&
               src_blocks[static_cast<std::size_t>(end)] == src_blocks[static_cast<std::size_t>(end - 1)] + 1 &&
               dst_blocks[static_cast<std::size_t>(end)] == dst_blocks[static_cast<std::size_t>(end - 1)] + 1)
          ++end;
        const int tokens = std::min(end * src.block_size, num_tokens) - first * src.block_size;
        const std::uint64_t length = static_cast<std::uint64_t>(tokens) * src.row_bytes();
        plan.descriptors.push_back(
            {.local_region = region,
             .local_offset = row_offset(src, layer, src_blocks[static_cast<std::size_t>(first)], 0),
             .remote_region = region,
             .remote_offset = row_offset(dst, layer, dst_blocks[static_cast<std::size_t>(first)], 0),
             .length = length});
        plan.num_uncoalesced += end - first;
        plan.bytes += length;
        first = end;
      }
  // END LAB07 SOLUTION
  return plan;
}

std::uint64_t kv_checksum(KVCache& cache, std::span<const std::int32_t> blocks, int num_tokens) {
  const KVLayout l = kv_layout_of(cache);
  check_table(l, blocks, num_tokens, "checksummed");
  check(!cache.on_device(), "kv checksum: the KV cache must be in host memory");
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (int layer = 0; layer < l.num_layers; ++layer)
    for (const float* base : {cache.key_blocks(layer), cache.value_blocks(layer)})
      for (int t = 0; t < num_tokens; ++t) {
        const float* row = base + (static_cast<std::size_t>(blocks[static_cast<std::size_t>(t / l.block_size)]) *
                                       static_cast<std::size_t>(l.block_size) +
                                   static_cast<std::size_t>(t % l.block_size)) *
                                      static_cast<std::size_t>(l.kv_dim);
        h = fnv1a({reinterpret_cast<const char*>(row), l.row_bytes()}, h);
      }
  return h;
}

}  // namespace servelab::disagg
