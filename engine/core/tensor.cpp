// SPDX-License-Identifier: MIT
#include "core/tensor.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include "core/error.h"

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
  check(t.shape.empty() || t.shape.back() % dtype_block_elements(dtype) == 0, "a ", dtype_name(dtype),
        " tensor's rows are whole blocks of ", dtype_block_elements(dtype), " elements, not ", t.shape_str());
  const std::size_t bytes = dtype_nbytes(dtype, n);
  // 64-byte alignment so SIMD kernels can use aligned loads on whole rows.
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  t.owner = std::shared_ptr<void>(p, std::free);
  t.data = p;
  return t;
}

Tensor Tensor::rows(std::int64_t begin, std::int64_t end) const {
  check(!shape.empty() && 0 <= begin && begin <= end && end <= shape[0], "tensor rows [", begin, ", ", end,
        ") outside shape ", shape_str());
  Tensor view = *this;
  view.shape[0] = end - begin;
  const std::size_t row_bytes = nbytes() / static_cast<std::size_t>(shape[0]);
  view.data = static_cast<std::byte*>(data) + static_cast<std::size_t>(begin) * row_bytes;
  return view;
}

Tensor concat_rows(const std::vector<const Tensor*>& parts) {
  check(!parts.empty(), "concat_rows of nothing");
  std::vector<std::int64_t> shape = parts[0]->shape;
  shape[0] = 0;
  for (const Tensor* p : parts) {
    check(p->dtype == parts[0]->dtype && p->shape.size() == shape.size() &&
              std::equal(p->shape.begin() + 1, p->shape.end(), shape.begin() + 1),
          "concat_rows: ", p->shape_str(), " does not stack onto ", parts[0]->shape_str());
    shape[0] += p->shape[0];
  }
  Tensor out = Tensor::zeros(parts[0]->dtype, shape);
  auto* dst = static_cast<std::byte*>(out.data);
  for (const Tensor* p : parts) {
    std::memcpy(dst, p->data, p->nbytes());
    dst += p->nbytes();
  }
  return out;
}

}  // namespace servelab
