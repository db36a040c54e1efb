// SPDX-License-Identifier: MIT
// The rows and OpenBLAS paths against a double-precision loop, and the deterministic
// path's promise: a row's result does not depend on the batch it is in.
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/cpu/rows.h"
#include "kernels/gemm.h"
#include "gemm_reference.h"
#include "test_util.h"

using namespace servelab;

using test::gemm_reference;
using test::random_weight;

TEST_CASE("matmul = x W^T / fast and deterministic / on ragged shapes", "[gemm]") {
  ThreadPool pool(2);
  for (int M : {1, 17, 64, 300})  // 300 is past every rows_kernel_max_m(): a library path
    for (auto [N, K] : {std::pair{1, 1}, {33, 7}, {96, 130}}) {
      const Tensor w = random_weight(N, K, 1);
      const auto x = test::random_floats(static_cast<std::size_t>(M) * K, 2);
      const auto expected = gemm_reference(x, w, M);
      for (bool det : {false, true}) {
        std::vector<float> out(static_cast<std::size_t>(M) * N, NAN);  // poisoned: an unwritten element fails
        matmul(KernelContext{&pool, det}, out.data(), x.data(), w, M);
        INFO("M " << M << " N " << N << " K " << K << (det ? " deterministic" : " fast"));
        // K products of O(1) terms: error grows like sqrt(K) * 2^-24 per element.
        CHECK(test::all_close(out, expected, 1e-5 * std::sqrt(K), 1e-5));
      }
    }
}

TEST_CASE("deterministic matmul: row m is bit-identical for any batch size and thread count", "[gemm][deterministic]") {
  const int N = 50, K = 300;
  const Tensor w = random_weight(N, K, 3);
  const auto x = test::random_floats(33 * K, 4);
  ThreadPool one(1), two(2);
  std::vector<float> batch(33 * N), single(N);
  matmul(KernelContext{&two, true}, batch.data(), x.data(), w, 33);
  for (int m : {0, 16, 32}) {
    matmul(KernelContext{&one, true}, single.data(), x.data() + m * K, w, 1);
    CHECK(std::memcmp(single.data(), batch.data() + m * N, N * sizeof(float)) == 0);
  }
}

TEST_CASE("every instruction set's row kernel matches the reference - f32 and bf16 weights", "[gemm]") {
  // K = 130 and 7 leave tails of 2 and 7 after the 8- and 16-lane loops; N = 13 leaves a 4-row tile tail.
  for (cpu::Isa isa : {cpu::Isa::Avx512, cpu::Isa::Avx2, cpu::Isa::Generic}) {
    if (!cpu::isa_supported(isa)) {
      WARN("row kernel " << cpu::isa_name(isa) << " not tested: this CPU lacks it");
      continue;
    }
    // M = 4, 5, 7, 9: the tiles of 2 and 1 after AVX2's tiles of 3 (4 runs as 2 + 2) and AVX-512's of 4.
    for (DType dtype : {DType::F32, DType::BF16})
      for (int M : {1, 2, 4, 5, 7, 9})
        for (auto [N, K] : {std::pair{13, 130}, {4, 7}, {33, 64}, {1, 1}}) {
          const Tensor w = random_weight(N, K, 5, dtype);
          const auto x = test::random_floats(static_cast<std::size_t>(M) * K, 6);
          std::vector<float> out(static_cast<std::size_t>(M) * N, NAN);
          cpu::rows_kernel(isa)(out.data(), x.data(), w.data, dtype, M, N, K, 0, N);
          INFO(cpu::isa_name(isa) << " " << dtype_name(dtype) << " M " << M << " N " << N << " K " << K);
          CHECK(test::all_close(out, gemm_reference(x, w, M), 1e-5 * std::sqrt(K), 1e-5));
          // Determinism: each row alone gives the same bits as inside the batch.
          std::vector<float> alone(N);
          for (int m = 0; m < M; ++m) {
            cpu::rows_kernel(isa)(alone.data(), x.data() + static_cast<std::size_t>(m) * K, w.data, dtype, 1, N, K, 0,
                                  N);
            CHECK(std::memcmp(alone.data(), out.data() + static_cast<std::size_t>(m) * N, N * sizeof(float)) == 0);
          }
        }
  }
}

TEST_CASE("the bf16 dot-product row kernel stays within the bf16 bound and is deterministic", "[gemm][bf16]") {
  if (!cpu::bf16_dot_supported()) {
    WARN("bf16 dot-product row kernel not tested: this CPU has no AVX512_BF16 (or SERVELAB_ISA is narrower)");
    return;
  }
  // K = 130 and 7 leave tails of 2 and 7 after the 32-element steps; 64 has none; N = 13 leaves a tile tail.
  for (int M : {1, 2, 5, 9})
    for (auto [N, K] : {std::pair{13, 130}, {4, 7}, {33, 64}, {1, 1}}) {
      const Tensor w = random_weight(N, K, 5, DType::BF16);
      const auto x = test::random_floats(static_cast<std::size_t>(M) * K, 6);
      std::vector<std::uint16_t> xb(x.size());
      f32_to_bf16(x.data(), xb.data(), xb.size());
      std::vector<float> out(static_cast<std::size_t>(M) * N, NAN);
      cpu::rows_avx512_bf16(out.data(), xb.data(), w.as<const std::uint16_t>(), M, N, K, 0, N);
      const auto [outside, first] = test::outside_bf16_bound(out, x, w, M, true);
      INFO("M " << M << " N " << N << " K " << K << ": " << outside << " outside the bound; " << first);
      CHECK(outside == 0);
      std::vector<float> alone(N);
      for (int m = 0; m < M; ++m) {
        cpu::rows_avx512_bf16(alone.data(), xb.data() + static_cast<std::size_t>(m) * K, w.as<const std::uint16_t>(), 1,
                              N, K, 0, N);
        CHECK(std::memcmp(alone.data(), out.data() + static_cast<std::size_t>(m) * N, N * sizeof(float)) == 0);
      }
    }
  // matmul() takes it for decode with bf16_activations; without, the widening kernel's f32 result.
  ThreadPool pool(2);
  const int N = 70, K = 96;
  const Tensor w = random_weight(N, K, 7, DType::BF16);
  const auto x = test::random_floats(K, 8);
  std::vector<float> math(N, NAN), widened(N, NAN);
  matmul(KernelContext{.pool = &pool, .bf16_activations = true}, math.data(), x.data(), w, 1);
  matmul(KernelContext{.pool = &pool}, widened.data(), x.data(), w, 1);
  CHECK(test::outside_bf16_bound(math, x, w, 1, true).first == 0);
  CHECK(test::outside_bf16_bound(widened, x, w, 1, false).first == 0);
  CHECK_FALSE(test::outside_bf16_bound(math, x, w, 1, false).first == 0);  // the inputs really were rounded
}

TEST_CASE("the BLAS path widens bf16 weights tile by tile", "[gemm]") {
  ThreadPool pool(2);
  const int M = 20, N = 150, K = 96;  // N spans several 64-row tiles and both threads
  const Tensor w = random_weight(N, K, 8, DType::BF16);
  const auto x = test::random_floats(static_cast<std::size_t>(M) * K, 9);
  std::vector<float> out(static_cast<std::size_t>(M) * N, NAN);
  matmul_blas(KernelContext{&pool, false}, out.data(), x.data(), w, M);
  CHECK(test::all_close(out, gemm_reference(x, w, M), 1e-5 * std::sqrt(K), 1e-5));
  std::vector<float> spec(out.size(), NAN);
  matmul_reference(spec.data(), x.data(), w, M);
  CHECK(test::all_close(spec, gemm_reference(x, w, M), 1e-5 * std::sqrt(K), 1e-5));
}

TEST_CASE("add_bias adds the bias to every row", "[gemm]") {
  std::vector<float> out = {1, 2, 3, 4, 5, 6};
  const float bias[] = {10, 20, 30};
  add_bias(out.data(), bias, 2, 3);
  CHECK(out == std::vector<float>{11, 22, 33, 14, 25, 36});
}
