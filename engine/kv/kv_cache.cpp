// SPDX-License-Identifier: MIT
#include "kv/kv_cache.h"

#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/huge_pages.h"

namespace servelab {

std::size_t kv_cache_bytes_for(const ModelConfig& config, std::int64_t num_blocks, std::int64_t block_size) {
  check(config.num_hidden_layers > 0 && config.kv_dim() > 0,
        "KV cache: every size must be positive (layers, kv_dim, blocks, block size)");
  const std::int64_t factors[] = {static_cast<std::int64_t>(kv_bytes_per_token(config, DType::F32)), num_blocks,
                                  block_size};
  std::size_t bytes = 1;
  for (std::int64_t f : factors) {
    check(f > 0, "KV cache: every size must be positive (layers, kv_dim, blocks, block size)");
    check(bytes <= std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(f), "KV cache: ", num_blocks,
          " blocks of ", block_size, " tokens overflow the address range");
    bytes *= static_cast<std::size_t>(f);
  }
  return bytes;
}

KVCache::KVCache(const ModelConfig& config, int num_blocks, int block_size)
    : num_layers_(config.num_hidden_layers),
      num_blocks_(num_blocks),
      block_size_(block_size),
      kv_dim_(static_cast<std::size_t>(config.kv_dim())),
      bytes_per_token_(kv_bytes_per_token(config, DType::F32)) {
  check(num_blocks > 0, "KV cache: --num-blocks must be positive, got ", num_blocks);
  check(block_size > 0, "KV cache: --block-size must be positive, got ", block_size);
  kv_cache_bytes_for(config, num_blocks, block_size);  // throws on overflow before a subclass allocates
}

void KVCache::check_block(std::int32_t block, const char* what) const {
  check(block >= 0 && block < num_blocks_, what, ": block ", block, " out of range [0, ", num_blocks_, ")");
}

KVView KVCache::view(int layer, std::span<const std::int32_t> block_table) {
  check(layer >= 0 && layer < num_layers_, "KV cache: layer ", layer, " out of range [0, ", num_layers_, ")");
  check(!block_table.empty(), "KV cache: a sequence needs at least one block");
  for (std::int32_t b : block_table) check_block(b, "KV cache");
  // BEGIN LAB02 SOLUTION: KVCache::view, where attention reads a sequence's cached K and V rows
  if (block_table.size() == 1) {  // contiguous: the sequence's rows start at its one block
    const std::size_t at = static_cast<std::size_t>(block_table[0]) * block_size_ * kv_dim_;
    return KVView{key_blocks(layer) + at, value_blocks(layer) + at, kv_dim_, nullptr, 0};
  }
  return KVView{key_blocks(layer), value_blocks(layer), kv_dim_, block_table.data(), block_size_};
  // END LAB02 SOLUTION
}

void KVCache::export_blocks(std::span<const std::int32_t> block_ids, std::span<std::byte> out) {
  check(out.size() == block_ids.size() * bytes_per_block(), "KV export: ", block_ids.size(), " blocks need ",
        block_ids.size() * bytes_per_block(), " bytes, the buffer has ", out.size());
  const std::size_t half = bytes_per_block() / (2 * num_layers_);  // one layer's K (or V) rows of a block
  std::byte* dst = out.data();
  for (std::int32_t b : block_ids) {
    check_block(b, "KV export");
    const std::size_t at = static_cast<std::size_t>(b) * block_size_ * kv_dim_;
    for (int l = 0; l < num_layers_; ++l) {
      copy_out(dst, key_blocks(l) + at, half);
      copy_out(dst + half, value_blocks(l) + at, half);
      dst += 2 * half;
    }
  }
}

void KVCache::import_blocks(std::span<const std::int32_t> block_ids, std::span<const std::byte> in) {
  check(in.size() == block_ids.size() * bytes_per_block(), "KV import: ", block_ids.size(), " blocks of ",
        bytes_per_block(), " bytes expected, got ", in.size(),
        " bytes (was it exported from a cache with another model shape or block size?)");
  const std::size_t half = bytes_per_block() / (2 * num_layers_);
  const std::byte* src = in.data();
  for (std::int32_t b : block_ids) {
    check_block(b, "KV import");
    const std::size_t at = static_cast<std::size_t>(b) * block_size_ * kv_dim_;
    for (int l = 0; l < num_layers_; ++l) {
      copy_in(key_blocks(l) + at, src, half);
      copy_in(value_blocks(l) + at, src + half, half);
      src += 2 * half;
    }
  }
}

HostKVCache::HostKVCache(const ModelConfig& config, int num_blocks, int block_size)
    : KVCache(config, num_blocks, block_size) {
  // Zero-filled by the kernel page by page as blocks are first written, so the process holds only the part of
  // the budget its sequences have reached; 2 MiB pages, as the weights (core/huge_pages.h).
  const std::size_t half = bytes_allocated() / 2;
  k_ = allocate_huge_pages(half);
  v_ = allocate_huge_pages(half);
  set_storage(reinterpret_cast<float*>(k_.get()), reinterpret_cast<float*>(v_.get()));
}

void HostKVCache::copy_out(std::byte* dst, const float* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }

void HostKVCache::copy_in(float* dst, const std::byte* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }

}  // namespace servelab
