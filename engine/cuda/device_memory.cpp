// SPDX-License-Identifier: MIT
#include "cuda/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "cuda/check.h"

namespace servelab::cuda {

Tensor device_empty(DType dtype, std::vector<std::int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.device = Device::CUDA;
  t.shape = std::move(shape);
  std::int64_t n = 1;
  for (std::int64_t d : t.shape) n *= d;
  void* p = nullptr;
  // cudaMalloc of 0 bytes returns null, which Tensor reads as "empty"; allocate at least one element.
  const std::size_t bytes = static_cast<std::size_t>(n > 0 ? n : 1) * dtype_size(dtype);
  CUDA_CHECK(cudaMalloc(&p, bytes));
  // The deleter must not throw: it can run while an earlier CUDA error unwinds the stack.
  t.owner = std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
  t.data = p;
  return t;
}

Tensor to_device(const Tensor& host) {
  check(host.device == Device::CPU, "to_device: tensor ", host.shape_str(), " is already in device memory");
  Tensor t = device_empty(host.dtype, host.shape);
  copy_to_device(t.data, host.data, host.nbytes());
  return t;
}

Tensor to_host(const Tensor& device) {
  check(device.device == Device::CUDA, "to_host: tensor ", device.shape_str(), " is not in device memory");
  Tensor t = Tensor::zeros(device.dtype, device.shape);
  copy_to_host(t.data, device.data, device.nbytes());
  return t;
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void copy_on_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

void copy_to_device_async(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cudaStreamPerThread));
}

void copy_to_host_async(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cudaStreamPerThread));
}

void fill_bytes_async(void* dst, int byte, std::size_t bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, cudaStreamPerThread));
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);  // not checked: a destructor must not throw
}

void PinnedBuffer::reserve(std::size_t bytes) {
  if (bytes <= bytes_) return;
  if (data_ != nullptr) CUDA_CHECK(cudaFreeHost(data_));
  data_ = nullptr;
  bytes_ = 0;
  void* p = nullptr;
  CUDA_CHECK(cudaMallocHost(&p, bytes));
  data_ = static_cast<std::byte*>(p);
  bytes_ = bytes;
}

void fill_bytes(void* dst, int byte, std::size_t bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMemset(dst, byte, bytes));
}

void synchronize() { CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread)); }

std::pair<std::size_t, std::size_t> memory_info() {
  std::size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return {free, total};
}

bool poison_requested() {
  const char* env = std::getenv("SERVELAB_CUDA_POISON");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

std::string device_name() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::ostringstream os;
  os << prop.name << " (sm_" << prop.major << prop.minor << ", " << prop.multiProcessorCount << " SMs, "
     << prop.totalGlobalMem / 1000000000 << " GB)";
  return os.str();
}

}  // namespace servelab::cuda
