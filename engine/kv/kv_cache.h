/**
 * @file kv_cache.h
 * @brief The KV cache interface and the contiguous (one region per
 *        sequence) cache that labs 01 and 02 use.
 *
 * A cache is a set of slots; a slot holds one sequence's K and V for every
 * layer. The model writes the new tokens' K/V and reads the whole prefix
 * through KVView, so a paged cache (lab 04) plugs in behind the same
 * interface.
 */
#pragma once

#include <cstddef>
#include <vector>

#include "kv/kv_view.h"
#include "config/model_config.h"

namespace servelab {

/// Storage for K and V of several sequences ("slots").
class KVCache {
 public:
  virtual ~KVCache() = default;
  /// K/V rows of sequence @p slot at @p layer.
  virtual KVView view(int layer, int slot) = 0;
  /// Number of slots (sequences that can be resident at once).
  virtual int num_slots() const = 0;
  /// Most tokens slot @p slot can hold.
  virtual int capacity(int slot) const = 0;
  /// Bytes of K/V storage allocated, over all layers and slots.
  virtual std::size_t bytes_allocated() const = 0;
};

/**
 * @brief Reserves max_seq_len tokens for every slot up front, as
 *        Hugging Face's DynamicCache does once grown, and as serving engines
 *        did before paging.
 * @verbatim
 *  k: [num_layers][num_slots][max_seq_len][kv_dim]   (same for v)
 * @endverbatim
 * Bytes = 2 * layers * kv_heads * head_dim * max_seq_len * num_slots * 4 (f32).
 */
class ContiguousKVCache final : public KVCache {
 public:
  /**
   * @brief Allocates zeroed storage.
   * @throws Error when a size is not positive.
   */
  ContiguousKVCache(const ModelConfig& config, int num_slots, int max_seq_len);
  KVView view(int layer, int slot) override;
  int num_slots() const override { return num_slots_; }
  int capacity(int) const override { return max_seq_len_; }
  std::size_t bytes_allocated() const override { return (k_.size() + v_.size()) * sizeof(float); }

 private:
  int num_slots_, max_seq_len_;
  std::size_t kv_dim_;
  std::vector<float> k_, v_;  // [num_layers][num_slots][max_seq_len][kv_dim]
};

}  // namespace servelab
