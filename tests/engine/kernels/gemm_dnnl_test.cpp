// SPDX-License-Identifier: MIT
// The oneDNN path against the double-precision loop: odd shapes, weights as
// stored ([N, K], read transposed), f32 and bf16 weights, one and two
// threads. ctest also runs the [gemm] tests under SERVELAB_ISA=avx2 and
// =generic (tests/engine/CMakeLists.txt), so every instruction set the
// machine has is covered.
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/rows.h"
#include "kernels/gemm.h"
#include "kernels/gemm_dnnl.h"
#include "gemm_reference.h"
#include "test_util.h"

using namespace servelab;
using test::gemm_reference;
using test::random_weight;

namespace {

// Shapes with every edge the kernels tile by: 1, 7 and 63 below a 16/64
// block, 65 just past one, 300 ragged; 4864 (qwen2.5-0.5b's MLP width) only
// where the double loop stays small.
struct Shape {
  int M, N, K;
};
const Shape kShapes[] = {
    {1, 1, 1},   {1, 7, 63},    {7, 1, 65},     {7, 63, 300},  {63, 65, 7},    {65, 300, 63},
    {300, 7, 1}, {300, 65, 65}, {63, 300, 300}, {7, 4864, 65}, {65, 63, 4864}, {1, 300, 4864},
};

bool skip_without_dnnl() {
  if (dnnl_available()) return false;
  ThreadPool pool(1);
  WARN("oneDNN path not tested: " << dnnl_kernel_name(KernelContext{.pool = &pool}, DType::F32, 1, 1, 1));
  return true;
}

}  // namespace

TEST_CASE("oneDNN matmul = x W^T with f32 weights on odd shapes, 1 and 2 threads", "[gemm][dnnl]") {
  if (skip_without_dnnl()) return;
  ThreadPool one(1), two(2);
  for (const Shape& s : kShapes) {
    const Tensor w = random_weight(s.N, s.K, 11);
    const auto x = test::random_floats(static_cast<std::size_t>(s.M) * s.K, 12);
    const auto expected = gemm_reference(x, w, s.M);
    for (ThreadPool* pool : {&one, &two}) {
      std::vector<float> out(static_cast<std::size_t>(s.M) * s.N, NAN);  // poisoned: an unwritten element fails
      matmul_dnnl(KernelContext{pool, false}, out.data(), x.data(), w, s.M);
      INFO(cpu::isa_name(cpu::active_isa())
           << " M " << s.M << " N " << s.N << " K " << s.K << " threads " << pool->num_threads());
      CHECK(test::all_close(out, expected, test::kKernelAtol * std::sqrt(s.K), test::kKernelRtol));
    }
  }
}

TEST_CASE("oneDNN matmul with bf16 weights stays within its rounding bound - widened and in bf16 arithmetic",
          "[gemm][dnnl]") {
  if (skip_without_dnnl()) return;
  // Bound: test::outside_bf16_bound() (gemm_dnnl.h); widened to f32 (the default), only the f32 sum's term.
  ThreadPool two(2);
  for (bool bf16_activations : {false, true}) {
    for (const Shape& s : kShapes) {
      const Tensor w = random_weight(s.N, s.K, 13, DType::BF16);
      const auto x = test::random_floats(static_cast<std::size_t>(s.M) * s.K, 14);
      std::vector<float> out(static_cast<std::size_t>(s.M) * s.N, NAN);
      matmul_dnnl(KernelContext{.pool = &two, .bf16_activations = bf16_activations}, out.data(), x.data(), w, s.M);
      const bool bf16_math = bf16_activations && dnnl_bf16_arithmetic();
      const auto [outside, first] = test::outside_bf16_bound(out, x, w, s.M, bf16_math);
      INFO((bf16_math ? "bf16 arithmetic" : "widened to f32")
           << " M " << s.M << " N " << s.N << " K " << s.K << ": " << outside << " of " << out.size()
           << " outside the bound; " << first);
      CHECK(outside == 0);
    }
  }
}

TEST_CASE("fast matmul hands long prefills to oneDNN - decode and deterministic mode stay on the row kernels",
          "[gemm][dnnl]") {
  ThreadPool pool(2);
  const KernelContext fast{&pool, false}, deterministic{&pool, true};
  for (DType dtype : {DType::F32, DType::BF16}) {
    CHECK(matmul_path(fast, dtype, 1) == GemmPath::Rows);
    CHECK(matmul_path(deterministic, dtype, 512) == GemmPath::Rows);
    CHECK(matmul_path(fast, dtype, 512) == (dnnl_available() ? GemmPath::OneDnn : GemmPath::OpenBlas));
    CHECK_FALSE(matmul_kernel_name(fast, dtype, 512, 896, 896).empty());
  }
  // And what it hands over is right: matmul() on a prefill-sized product.
  const int M = 320, N = 130, K = 96;
  const Tensor w = random_weight(N, K, 15);
  const auto x = test::random_floats(static_cast<std::size_t>(M) * K, 16);
  std::vector<float> out(static_cast<std::size_t>(M) * N, NAN);
  matmul(fast, out.data(), x.data(), w, M);
  CHECK(test::all_close(out, gemm_reference(x, w, M), test::kKernelAtol * std::sqrt(K), test::kKernelRtol));
}
