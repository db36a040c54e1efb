// SPDX-License-Identifier: MIT
/**
 * @file safetensors.h
 * @brief Reads Hugging Face safetensors checkpoints: one file, or shards
 *        listed in model.safetensors.index.json. Files are memory-mapped.
 *
 * Format (https://huggingface.co/docs/safetensors):
 * @verbatim
 * | u64 little-endian N | N bytes of JSON header | tensor bytes ............ |
 *   header: {"name": {"dtype": "BF16", "shape": [896, 4864],
 *                     "data_offsets": [begin, end]}, ..., "__metadata__": {...}}
 *   offsets are relative to the first byte after the header.
 * @endverbatim
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tensor.h"

namespace servelab {

/// One tensor's entry in a safetensors header.
struct TensorEntry {
  std::string name;                 ///< tensor name, e.g. "model.layers.0.self_attn.q_proj.weight"
  DType dtype = DType::F32;         ///< stored element type
  std::vector<std::int64_t> shape;  ///< stored shape
  const std::byte* data = nullptr;  ///< first byte, inside the mapping
  std::size_t nbytes = 0;           ///< byte length
  std::string file;                 ///< file it lives in, for error messages
};

/**
 * @brief Maps the whole regular file @p path read-only; the shared_ptr unmaps it when the last view goes.
 * @param what names the expected content in errors ("a safetensors file").
 * @param[out] size receives the file's size in bytes.
 * @throws Error naming the file when it is missing, not a regular file, empty, or cannot be mapped.
 */
std::shared_ptr<void> map_file(const std::filesystem::path& path, const std::string& what, std::size_t& size);

/// map_file()'s deleter: it unmaps, and `std::get_deleter<FileMapping>(owner)` tells a tensor that
/// points into a mapped file from one on the heap.
struct FileMapping {
  std::size_t size = 0;  ///< bytes mapped
  /// Unmaps the @p size bytes at @p base.
  void operator()(void* base) const;
};

/**
 * @brief Hands back to the OS the pages of mapped checkpoint files that no tensor of @p live reads.
 *
 * Loading reads every byte of a file (the NaN check, conversions, stacking), so all its pages are
 * resident afterwards, also those of weights that were converted (bf16 from an f32 file) or stacked
 * (q, k and v into one matrix) into heap copies: they count in the process's resident memory though
 * nothing reads them again. This drops (MADV_DONTNEED) every whole page of a mapping that no live
 * tensor touches; a page that one does, even in part, stays. A dropped page holds the file's bytes
 * again if it is ever read. Tensors on the heap, and mappings no live tensor points into, are untouched.
 * @return bytes of the pages dropped, whether or not they were resident.
 */
std::size_t release_unused_mapped_pages(const std::vector<const Tensor*>& live);

/**
 * @brief Parses and validates a whole safetensors file held in memory (the
 *        mapping, or a fuzzer's bytes).
 *
 * Every number is checked before it is used: shape entries and their product
 * (no overflow), data_offsets inside the data section and spanning exactly
 * the shape's bytes, and no two tensors sharing bytes.
 * @param file names the file in errors.
 * @return the entries by name, pointing into [@p bytes, @p bytes + @p size).
 * @throws Error naming the file (and tensor) on any violation.
 */
std::map<std::string, TensorEntry> parse_safetensors(const std::byte* bytes, std::size_t size, const std::string& file);

/**
 * @brief The shard file names of a parsed model.safetensors.index.json, each once, in order of first use.
 * @param source names the index file in errors.
 * @throws Error when weight_map is missing or names a path that is not a plain
 *         file name in the model folder ("../x", "/etc/passwd", "sub/x").
 */
std::vector<std::string> parse_safetensors_index(const nlohmann::json& index, const std::string& source);

/// A memory-mapped safetensors file with its parsed, validated header.
class SafetensorsFile {
 public:
  /**
   * @brief Maps @p path read-only and validates the header against the file size.
   * @throws Error naming the file when it is missing, too short, has a bad
   *         header, an unsupported dtype, or a tensor whose bytes run past the
   *         end of the file (a truncated download).
   */
  explicit SafetensorsFile(const std::filesystem::path& path);

  /// Entries by tensor name.
  const std::map<std::string, TensorEntry>& entries() const { return entries_; }
  /// Keeps the mapping alive; tensors that view into it share this.
  const std::shared_ptr<void>& mapping() const { return mapping_; }

 private:
  std::shared_ptr<void> mapping_;
  std::map<std::string, TensorEntry> entries_;
};

/// All tensors of a checkpoint folder (single-file or sharded).
class Checkpoint {
 public:
  /**
   * @brief Opens `dir/model.safetensors`, or every shard named in
   *        `dir/model.safetensors.index.json`.
   * @throws Error naming the folder or file when neither exists, the index is
   *         malformed, or a shard is unreadable.
   */
  explicit Checkpoint(const std::filesystem::path& dir);

  /// True when a tensor of that name exists.
  bool contains(const std::string& name) const;

  /**
   * @brief Returns tensor @p name in dtype @p as (f32 or bf16) with shape @p expected.
   *
   * When the stored dtype is already @p as and the bytes are aligned, the
   * tensor is a view into the mapping (no copy). Otherwise it is converted
   * into a new buffer: f16/bf16 -> f32 exactly, f32/f16 -> bf16 rounded to
   * nearest even.
   * @throws Error naming the tensor, its file and the expected shape when it
   *         is missing or its shape differs, or naming the tensor when it
   *         holds a NaN or an Inf.
   */
  Tensor load(const std::string& name, const std::vector<std::int64_t>& expected, DType as = DType::F32) const;

  /// Names of the tensors no load() has asked for yet, sorted.
  std::vector<std::string> unused() const;

  /// Number of files opened (1 for a single-file checkpoint).
  std::size_t num_files() const { return files_.size(); }

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorEntry*> index_;
  std::map<std::string, const SafetensorsFile*> owner_;
  mutable std::set<std::string> used_;  // names load() has returned, for unused()
};

}  // namespace servelab
