// SPDX-License-Identifier: MIT
#include "kernels/embedding.h"

#include <cstring>

namespace servelab {

void embedding_lookup(const Tensor& embedding, const std::vector<std::int32_t>& token_ids, float* out) {
  const std::size_t H = static_cast<std::size_t>(embedding.shape[1]);
  for (std::size_t t = 0; t < token_ids.size(); ++t) {
    const std::size_t row = static_cast<std::size_t>(token_ids[t]) * H;
    float* dst = out + t * H;
    if (embedding.dtype == DType::F32) {
      std::memcpy(dst, embedding.as<const float>() + row, H * sizeof(float));
    } else {
      const std::uint16_t* src = embedding.as<const std::uint16_t>() + row;
      for (std::size_t i = 0; i < H; ++i) dst[i] = bf16_to_f32(src[i]);
    }
  }
}

}  // namespace servelab
