// SPDX-License-Identifier: MIT
#include "core/dtype.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace servelab {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_0: return "q4_0";
    case DType::Q4_1: return "q4_1";
  }
  return "?";
}

DType parse_dtype(std::string_view text, const std::string& what) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "f32" || t == "float32" || t == "float") return DType::F32;
  if (t == "f16" || t == "float16" || t == "half") return DType::F16;
  if (t == "bf16" || t == "bfloat16") return DType::BF16;
  fail(what, ": unsupported dtype '", text, "' (expected one of f32/float32, f16/float16, bf16/bfloat16)");
}

void f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(in[i]);
}

}  // namespace servelab
