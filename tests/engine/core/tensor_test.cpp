// SPDX-License-Identifier: MIT
// Row views and stacking, used to fuse q/k/v and gate/up without holding weights twice.
#include "core/error.h"
#include "core/tensor.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("rows() is a view sharing storage, concat_rows() stacks copies", "[tensor]") {
  Tensor a = Tensor::zeros(DType::F32, {2, 3}), b = Tensor::zeros(DType::F32, {1, 3});
  for (int i = 0; i < 6; ++i) a.as<float>()[i] = static_cast<float>(i);
  for (int i = 0; i < 3; ++i) b.as<float>()[i] = 10.0f + i;
  const Tensor ab = concat_rows({&a, &b});
  CHECK(ab.shape == std::vector<std::int64_t>{3, 3});
  CHECK(std::vector<float>(ab.as<float>(), ab.as<float>() + 9) == std::vector<float>{0, 1, 2, 3, 4, 5, 10, 11, 12});
  const Tensor last = ab.rows(2, 3);
  CHECK(last.shape == std::vector<std::int64_t>{1, 3});
  CHECK(last.as<float>() == ab.as<float>() + 6);  // a view, not a copy
  CHECK(last.owner == ab.owner);
  Tensor h = Tensor::zeros(DType::BF16, {4, 2});
  CHECK(h.rows(1, 3).as<std::uint16_t>() == h.as<std::uint16_t>() + 2);
  REQUIRE_ERROR_MENTIONS(ab.rows(2, 4), "[2, 4)", "[3, 3]");
  const Tensor wide = Tensor::zeros(DType::F32, {1, 4});
  REQUIRE_ERROR_MENTIONS(concat_rows({&a, &wide}), "[1, 4]", "[2, 3]");
}
