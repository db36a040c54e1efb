// SPDX-License-Identifier: MIT
#include "kernels/embedding.h"

#include <cstddef>

#include "core/quant.h"

namespace servelab {

void embedding_lookup(const Tensor& embedding, const std::vector<std::int32_t>& token_ids, float* out) {
  const std::size_t H = static_cast<std::size_t>(embedding.shape[1]);
  for (std::size_t t = 0; t < token_ids.size(); ++t) {
    const std::size_t row_bytes = dtype_nbytes(embedding.dtype, static_cast<std::int64_t>(H));
    dequantize_row(embedding.dtype,
                   embedding.as<const std::byte>() + static_cast<std::size_t>(token_ids[t]) * row_bytes, out + t * H,
                   static_cast<std::int64_t>(H));
  }
}

}  // namespace servelab
