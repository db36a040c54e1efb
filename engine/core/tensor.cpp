#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

namespace servelab {

std::int64_t Tensor::numel() const {
  if (data == nullptr) return 0;
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::string Tensor::shape_str() const { return shape_to_string(shape); }

std::string shape_to_string(const std::vector<std::int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

Tensor Tensor::zeros(DType dtype, std::vector<std::int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  std::int64_t n = 1;
  for (std::int64_t d : t.shape) n *= d;
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(dtype);
  // 64-byte alignment so SIMD kernels can use aligned loads on whole rows.
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  t.owner = std::shared_ptr<void>(p, std::free);
  t.data = p;
  return t;
}

}  // namespace servelab
