// SPDX-License-Identifier: MIT
/**
 * @file tensor.h
 * @brief A typed, shaped view of memory with shared ownership of its storage.
 *
 * A Tensor does not own a buffer by itself: it holds a `shared_ptr` to
 * whatever keeps the bytes alive (a heap vector, a memory-mapped checkpoint
 * file, later a CUDA allocation). That is how an f32 weight can point
 * straight into an mmap'ed safetensors file with no copy.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace servelab {

/// Where a tensor's bytes live.
enum class Device { CPU, CUDA };

/// A row-major tensor view: dtype, shape and a pointer kept alive by `owner`.
struct Tensor {
  DType dtype = DType::F32;         ///< element type
  Device device = Device::CPU;      ///< memory the data pointer belongs to
  std::vector<std::int64_t> shape;  ///< dimensions, outermost first
  void* data = nullptr;             ///< first element; null for an empty tensor
  std::shared_ptr<void> owner;      ///< keeps the storage alive (heap block or mmap)

  /// Number of elements (1 for a scalar, 0 for an empty tensor).
  std::int64_t numel() const;
  /// Size in bytes of the elements.
  std::size_t nbytes() const { return dtype_nbytes(dtype, numel()); }
  /// True when the tensor has no storage.
  bool empty() const { return data == nullptr; }
  /// Typed pointer to the elements; the caller is responsible for asking for the right type.
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  /// Shape as text, e.g. "[896, 4864]".
  std::string shape_str() const;

  /**
   * @brief A view of rows [begin, end) of the outermost dimension, sharing this tensor's storage.
   * @throws Error when the range is outside [0, shape[0]].
   */
  Tensor rows(std::int64_t begin, std::int64_t end) const;

  /**
   * @brief Allocates a zero-filled CPU tensor that owns its storage.
   * @param dtype element type.
   * @param shape dimensions (row-major).
   */
  static Tensor zeros(DType dtype, std::vector<std::int64_t> shape);
};

/**
 * @brief A new tensor holding @p parts stacked along the outermost dimension.
 * @throws Error when the parts differ in dtype or in their inner dimensions.
 */
Tensor concat_rows(const std::vector<const Tensor*>& parts);

/// Formats a shape as "[a, b, c]".
std::string shape_to_string(const std::vector<std::int64_t>& shape);

}  // namespace servelab
