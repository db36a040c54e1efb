// SPDX-License-Identifier: MIT
// Hand-computable cases for RMSNorm, SiLU*mul and RoPE over a batch.
#include "core/thread_pool.h"
#include "kernels/math/rmsnorm.h"
#include "kernels/ops.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("rmsnorm: x / sqrt(mean(x^2) + eps) * w", "[ops]") {
  ThreadPool pool(2);
  // Row (3, 4): mean square 12.5; row (1, 1): mean square 1.
  const std::vector<float> x = {3, 4, 1, 1};
  const std::vector<float> w = {1, 2};
  std::vector<float> out(4, NAN);
  rmsnorm(KernelContext{&pool}, out.data(), x.data(), w.data(), 2, 2, 0.0f);
  CHECK(out[0] == Approx(3 / std::sqrt(12.5)));
  CHECK(out[1] == Approx(2 * 4 / std::sqrt(12.5)));
  CHECK(out[2] == Approx(1.0));
  CHECK(out[3] == Approx(2.0));
}

TEST_CASE("silu_mul: silu(gate) * up on stacked rows", "[ops]") {
  ThreadPool pool(2);
  // Two rows of [gate | up] with F = 3.
  const std::vector<float> gate_up = {0.0f, 1.0f, -2.0f, 5.0f, 2.0f, 1.0f,  //
                                      3.0f, 0.0f, 0.0f,  1.0f, 7.0f, 7.0f};
  std::vector<float> out(6, NAN);
  silu_mul(KernelContext{&pool}, out.data(), gate_up.data(), 2, 3);
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == Approx(2.0 / (1.0 + std::exp(-1.0))));
  CHECK(out[2] == Approx(-2.0 / (1.0 + std::exp(2.0))));
  CHECK(out[3] == Approx(3.0 / (1.0 + std::exp(-3.0))));
  CHECK(out[4] == 0.0f);
}

TEST_CASE("rope over a batch rotates each row by its own position", "[ops]") {
  ThreadPool pool(2);
  const std::vector<float> inv = {1.0f};
  // Two rows, one head of width 2 each, positions 0 and 1: (1, 0) stays, (1, 0) -> (cos 1, sin 1).
  std::vector<float> x = {1, 0, 1, 0};
  const int positions[] = {0, 1};
  rope(KernelContext{&pool}, x.data(), positions, 2, 1, 2, inv.data());
  CHECK(x[0] == 1.0f);
  CHECK(x[1] == 0.0f);
  CHECK(x[2] == Approx(std::cos(1.0)));
  CHECK(x[3] == Approx(std::sin(1.0)));
}
