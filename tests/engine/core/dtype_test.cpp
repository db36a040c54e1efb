// SPDX-License-Identifier: MIT
// Hand-computable bit patterns for the f16/bf16 -> f32 conversions the loader relies on.
#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "core/error.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("bf16 widens by appending 16 zero bits", "[dtype]") {
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  CHECK(bf16_to_f32(0xc000) == -2.0f);
  CHECK(bf16_to_f32(0x3e80) == 0.25f);
  CHECK(std::isinf(bf16_to_f32(0x7f80)));
}

TEST_CASE("f32 -> bf16 rounds to nearest even", "[dtype]") {
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  // 1 + 2^-8 is exactly half-way between bf16 1.0 and 1.0078125: ties go to the even mantissa (1.0).
  CHECK(f32_to_bf16(1.0f + 0x1.0p-8f) == 0x3f80);
  CHECK(f32_to_bf16(1.0f + 0x1.8p-8f) == 0x3f81);
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("f16 widens exactly / subnormals and specials included", "[dtype]") {
  CHECK(f16_to_f32(0x3c00) == 1.0f);
  CHECK(f16_to_f32(0xc000) == -2.0f);
  CHECK(f16_to_f32(0x7bff) == 65504.0f);      // largest normal half
  CHECK(f16_to_f32(0x0400) == 0x1.0p-14f);    // smallest normal
  CHECK(f16_to_f32(0x0001) == 0x1.0p-24f);    // smallest subnormal
  CHECK(f16_to_f32(0x03ff) == 0x1.ff8p-15f);  // largest subnormal
  CHECK(std::signbit(f16_to_f32(0x8000)));
  CHECK(std::isinf(f16_to_f32(0x7c00)));
  CHECK(std::isnan(f16_to_f32(0x7e00)));
}

TEST_CASE("dtype names from config.json / safetensors and flags", "[dtype]") {
  CHECK(parse_dtype("bfloat16", "x") == DType::BF16);
  CHECK(parse_dtype("BF16", "x") == DType::BF16);
  CHECK(parse_dtype("float16", "x") == DType::F16);
  CHECK(parse_dtype("F32", "x") == DType::F32);
  REQUIRE_ERROR_MENTIONS(parse_dtype("I8", "model.safetensors tensor 'w'"), "model.safetensors tensor 'w'", "I8");
}
