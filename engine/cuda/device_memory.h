// SPDX-License-Identifier: MIT
/**
 * @file device_memory.h
 * @brief Tensors in CUDA device memory, and the explicit copies between
 *        host and device.
 *
 * A device tensor is an ordinary servelab::Tensor with device == CUDA whose
 * owner frees the allocation with cudaFree, so views (Tensor::rows) and
 * sharing work as on the host. Its data pointer is a device address: host
 * code may pass it around and do pointer arithmetic on it, but must never
 * read or write through it. Nothing copies implicitly: every transfer in the
 * engine is one of the calls below, so the bytes that cross PCIe can be
 * read off the code.
 *
 * Plain C++: callable from g++-compiled code (the model, tests, benchmarks).
 * All calls run on the calling thread's default stream (the engine is built
 * with CUDA_API_PER_THREAD_DEFAULT_STREAM, so that is cudaStreamPerThread,
 * a stream a CUDA Graph can capture), in order with the kernels.
 * @throws Error (via CUDA_CHECK) naming the failed CUDA call, e.g. out of memory.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace servelab::cuda {

/**
 * @brief Allocates an uninitialised device tensor.
 * @param dtype element type.
 * @param shape dimensions (row-major).
 * @return a tensor with device == Device::CUDA that owns its allocation.
 */
Tensor device_empty(DType dtype, std::vector<std::int64_t> shape);

/// A device copy of host tensor @p host (same dtype and shape).
Tensor to_device(const Tensor& host);

/// A host copy of device tensor @p device (same dtype and shape).
Tensor to_host(const Tensor& device);

/// Copies @p bytes from host @p src to device @p dst.
void copy_to_device(void* dst, const void* src, std::size_t bytes);

/// Copies @p bytes from device @p src to host @p dst (waits for the kernels queued before it).
void copy_to_host(void* dst, const void* src, std::size_t bytes);

/// Copies @p bytes from device @p src to device @p dst.
void copy_on_device(void* dst, const void* src, std::size_t bytes);

/// Queues a copy of @p bytes from host @p src (pinned, see PinnedBuffer) to device @p dst; returns at once.
void copy_to_device_async(void* dst, const void* src, std::size_t bytes);

/// Queues a copy of @p bytes from device @p src to host @p dst (pinned); returns at once: synchronize() before reading.
void copy_to_host_async(void* dst, const void* src, std::size_t bytes);

/// Queues a fill of @p bytes bytes at @p dst with @p byte, in order with the kernels; returns at once.
void fill_bytes_async(void* dst, int byte, std::size_t bytes);

/**
 * @brief Page-locked host memory (cudaMallocHost), reused across steps: the
 *        GPU copies to and from it directly, with no pageable bounce buffer,
 *        and an async copy from it can overlap the host's next work.
 */
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  /// Makes room for @p bytes; reallocates (contents lost) only when it must grow.
  void reserve(std::size_t bytes);
  /// The memory, nullptr before the first reserve().
  std::byte* data() const { return data_; }
  /// Bytes reserved.
  std::size_t capacity() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Sets @p bytes bytes of device memory at @p dst to @p byte (0xFF makes every f32 a NaN).
void fill_bytes(void* dst, int byte, std::size_t bytes);

/// Waits until every kernel and copy queued by this thread has finished; @throws Error naming a fault in any of them.
void synchronize();

/**
 * @brief True when the environment variable SERVELAB_CUDA_POISON is "1": the
 *        CUDA backend then fills its buffers and new KV caches with NaN
 *        (bytes 0xFF) instead of leaving them uninitialised or zeroed, so a
 *        kernel that skips an element, or reads one nobody wrote, turns the
 *        result into NaN. The GPU tests turn it on.
 */
bool poison_requested();

/**
 * @brief True when the runtime holds an error no check has cleared yet
 *        (cudaPeekAtLastError). A failed CUDA_CHECK clears it before throwing,
 *        so a later launch check is never blamed for an earlier failure.
 */
bool error_pending();

/// cudaMemGetInfo on the current device: [0] free bytes, [1] total bytes.
std::pair<std::size_t, std::size_t> memory_info();

/// Name and compute capability of the current device, e.g. "NVIDIA H200 (sm_90, 132 SMs, 141 GB)".
std::string device_name();

/**
 * @brief Uploads the bytes of @p values into a new device buffer.
 * @return a 1-D tensor of sizeof(T) / 4 f32 words per value (its dtype
 *         gives the element size only; read it back as<T>()).
 */
template <typename T>
Tensor upload(const std::vector<T>& values) {
  static_assert(sizeof(T) % 4 == 0, "upload() moves whole 4-byte words");
  Tensor t = device_empty(DType::F32, {static_cast<std::int64_t>(values.size() * sizeof(T) / 4)});
  copy_to_device(t.data, values.data(), values.size() * sizeof(T));
  return t;
}

/// Downloads @p n elements of type T from device address @p src.
template <typename T>
std::vector<T> download(const void* src, std::size_t n) {
  std::vector<T> out(n);
  copy_to_host(out.data(), src, n * sizeof(T));
  return out;
}

}  // namespace servelab::cuda
