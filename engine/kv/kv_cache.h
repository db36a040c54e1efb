// SPDX-License-Identifier: MIT
/**
 * @file kv_cache.h
 * @brief KV storage: one design, a pool of fixed-size blocks per layer, that
 *        both the contiguous cache of labs 01–03 and the paged cache of lab 04
 *        are configurations of.
 * @verbatim
 *  per layer, for K and for V:  [num_blocks, block_size, num_kv_heads, head_dim]  f32
 *
 *  contiguous (labs 01-03): block_size = longest sequence, one block per sequence
 *      seq 0 -> [block 0: t0 t1 t2 ... t(max-1)]
 *  paged (lab 04):          block_size = 16, a block table per sequence
 *      seq 0 -> table [5, 2]  = [block 5: t0..t15][block 2: t16..t31]
 * @endverbatim
 * Which blocks belong to which sequence is not the cache's business: the
 * caller (a BlockPool and a block table per request, or a test) says so in
 * each step's Batch. A block can be exported and imported as bytes, so a
 * request's KV can move between caches or processes (lab 07).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "config/model_config.h"
#include "kv/kv_view.h"

namespace servelab {

/// Per-layer block storage for K and V, in host or device memory.
class KVCache {
 public:
  /**
   * @brief Records the shape; subclasses allocate the storage.
   * @throws Error naming the flag (--num-blocks / --block-size) when a size is not positive.
   */
  KVCache(const ModelConfig& config, int num_blocks, int block_size);
  virtual ~KVCache() = default;
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  /// Decoder layers (each has its own K and V blocks).
  int num_layers() const { return num_layers_; }
  /// Blocks per layer.
  int num_blocks() const { return num_blocks_; }
  /// Tokens per block.
  int block_size() const { return block_size_; }
  /// Floats of one token's K (or V) in one layer: num_kv_heads * head_dim.
  std::size_t kv_dim() const { return kv_dim_; }
  /// Bytes one token occupies over all layers, K and V: kv_bytes_per_token(config, f32) = 2 * layers * kv_dim * 4.
  std::size_t bytes_per_token() const { return bytes_per_token_; }
  /// Bytes of one block over all layers, K and V (the unit export_blocks() moves).
  std::size_t bytes_per_block() const { return bytes_per_token() * static_cast<std::size_t>(block_size_); }
  /// Bytes of K/V storage allocated: num_blocks * bytes_per_block().
  std::size_t bytes_allocated() const { return bytes_per_block() * static_cast<std::size_t>(num_blocks_); }

  /// True when the storage is GPU memory (only kernels may dereference its addresses).
  virtual bool on_device() const = 0;
  /// Layer @p layer's K blocks, [num_blocks, block_size, kv_dim] (a device address when on_device()).
  float* key_blocks(int layer) { return k_base_ + layer_offset(layer); }
  /// Layer @p layer's V blocks, [num_blocks, block_size, kv_dim].
  float* value_blocks(int layer) { return v_base_ + layer_offset(layer); }

  /**
   * @brief How attention finds a sequence's tokens at @p layer.
   *
   * A table of one block is the contiguous case: the view points at that
   * block and has no table, so token t is simply row t. A longer table is
   * read through KVView::row(). The view keeps @p block_table's address: it
   * must outlive the view.
   * @throws Error when a block id is out of range or the table is empty.
   */
  KVView view(int layer, std::span<const std::int32_t> block_table);

  /**
   * @brief Copies blocks out as bytes: for each block in order, for each
   *        layer, its K rows then its V rows (bytes_per_block() per block).
   * @param out exactly block_ids.size() * bytes_per_block() bytes.
   * @throws Error when a block id is out of range or @p out has the wrong size.
   */
  void export_blocks(std::span<const std::int32_t> block_ids, std::span<std::byte> out);
  /**
   * @brief The inverse of export_blocks(): writes the bytes into @p block_ids,
   *        which may differ from the exporting cache's ids.
   * @throws Error when a block id is out of range or the byte count is not
   *         block_ids.size() * bytes_per_block() (another model shape or block size).
   */
  void import_blocks(std::span<const std::int32_t> block_ids, std::span<const std::byte> in);

 protected:
  /// Copies @p bytes from storage address @p src to host memory @p dst.
  virtual void copy_out(std::byte* dst, const float* src, std::size_t bytes) = 0;
  /// Copies @p bytes from host memory @p src to storage address @p dst.
  virtual void copy_in(float* dst, const std::byte* src, std::size_t bytes) = 0;
  /// Checks a block id; @p what names the caller in the message.
  void check_block(std::int32_t block, const char* what) const;
  /// A subclass hands over its storage, [num_layers][num_blocks][block_size][kv_dim] floats each for K and V,
  /// owned by the subclass and alive as long as it is.
  void set_storage(float* k, float* v) {
    k_base_ = k;
    v_base_ = v;
  }

 private:
  /// Floats from the start of the storage to layer @p layer's first block.
  std::size_t layer_offset(int layer) const {
    return static_cast<std::size_t>(layer) * static_cast<std::size_t>(num_blocks_) *
           static_cast<std::size_t>(block_size_) * kv_dim_;
  }

  int num_layers_, num_blocks_, block_size_;
  std::size_t kv_dim_;
  std::size_t bytes_per_token_;  // kv_bytes_per_token(config, f32)
  float* k_base_ = nullptr;      // the subclass's storage (set_storage)
  float* v_base_ = nullptr;
};

/// KV blocks in host memory, read by the CPU kernels.
class HostKVCache final : public KVCache {
 public:
  /**
   * @brief Allocates zeroed storage, checking the size first.
   * @throws Error when a size is not positive or the total does not fit in memory's address range.
   */
  HostKVCache(const ModelConfig& config, int num_blocks, int block_size);
  bool on_device() const override { return false; }

 private:  // a final class: only KVCache calls the copies
  void copy_out(std::byte* dst, const float* src, std::size_t bytes) override;
  void copy_in(float* dst, const std::byte* src, std::size_t bytes) override;

  std::shared_ptr<std::byte> k_, v_;  // f32 [num_layers][num_blocks][block_size][kv_dim]
};

/**
 * @brief Bytes of KV storage for @p num_blocks blocks of @p block_size tokens
 *        of @p config (f32), checked against overflow before anything is allocated.
 * @throws Error when the product overflows std::size_t.
 */
std::size_t kv_cache_bytes_for(const ModelConfig& config, std::int64_t num_blocks, std::int64_t block_size);

}  // namespace servelab
