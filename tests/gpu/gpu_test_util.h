// SPDX-License-Identifier: MIT
/**
 * @file gpu_test_util.h
 * @brief Helpers of the GPU tests: device copies of host vectors, NaN-poisoned
 *        outputs, and the tolerances of GPU-vs-CPU comparisons with their reasons.
 */
#pragma once

#include <vector>

#include "cuda/device_memory.h"
#include "test_util.h"

namespace servelab::test {

/**
 * Tolerances, |gpu - cpu| <= atol + rtol * |cpu|, and why:
 * - kOp*: one element-wise or per-row kernel against the CPU kernel on
 *   O(1) random data. They differ by CUDA's expf/sinf/cosf (at most 2 ulp
 *   off, glibc's are correctly rounded or nearly), by nvcc contracting
 *   a*b + c into one fma, and by tree-order sums of up to 4864 terms
 *   (RMSNorm, softmax): all around 1e-6 relative.
 * - kGemm*: a cuBLAS GEMM against a double-precision loop (the inputs
 *   rounded as the GPU path rounds them) with K up to 4864 and outputs up to
 *   ~25: the error is cuBLAS's f32 accumulation alone, about
 *   sqrt(K) · 2⁻²⁴ · |terms|. (An f32 reference loop was itself within 0.98×
 *   of this bound: a test that could fail for the reference's sake.)
 * - kLongAttention*: attention over up to 32k keys against a double loop. Each
 *   output is a softmax-weighted sum of up to 32k values accumulated in f32
 *   (relative error about sqrt(n) · 2⁻²⁴ ≈ 1e-5 at n = 32k, worst case n · 2⁻²⁴
 *   ≈ 2e-3 for a flat softmax); the queries are scaled so that softmax is
 *   peaked, which keeps the effective n small. A wrong head, key or position
 *   moves outputs by ~1e-1. Not yet measured on a GPU: the first device run
 *   prints the worst error (tests/gpu/decode_test.cpp).
 * - kModelF32*: a whole f32 forward pass, GPU against CPU. Both are f32
 *   throughout and differ only in summation orders and transcendental
 *   rounding: the same kind of difference as our CPU path against
 *   transformers, measured at 5e-5 worst on the fixtures (kF32Atol); twice
 *   that bound leaves room for a GPU we could not measure on, while a wrong
 *   op (a missing bias, RoPE off by one, the wrong KV head) moves logits by
 *   more than 1e-2. The fixtures' greedy margins are 2e-3 or more, so f32
 *   greedy tokens must be identical.
 * - kBf16*: GPU bf16 against CPU bf16. Same weights, but cuBLAS multiplies
 *   bf16 only by bf16, so the GPU rounds each GEMM input to bf16 (2⁻⁹
 *   relative) while the CPU keeps it in f32 (cuda/gemm.h says why). Measured
 *   by emulating that rounding on the CPU (every GEMM input rounded with
 *   f32_to_bf16, 32-48-token prompts): worst |Δlogit| 0.037 for the tiny,
 *   tiny-llama, small and qwen2.5-0.5b presets (logits up to ~5), and 0.27
 *   for the qwen2-tiny-bf16 fixture (logits up to ~9; its large weights,
 *   chosen to widen greedy margins, also amplify rounding). Bounds: 0.1 for
 *   presets, 0.6 + 0.05·|logit| for fixtures (the CPU's own bf16-vs-f32 bound,
 *   parity_test.cpp). Greedy tokens are compared only where the CPU's top-two
 *   margin exceeds twice the bound: one of 40 fixture positions flipped in
 *   the emulation.
 */
inline constexpr double kOpAtol = 1e-5, kOpRtol = 1e-5;
inline constexpr double kGemmAtol = 1e-4, kGemmRtol = 1e-4;
inline constexpr double kLongAttentionAtol = 1e-4, kLongAttentionRtol = 1e-4;
inline constexpr double kModelF32Atol = 2 * kF32Atol, kModelF32Rtol = 2 * kF32Rtol;
inline constexpr double kBf16PresetAtol = 0.1, kBf16PresetRtol = 0.0;
inline constexpr double kBf16FixtureAtol = 0.6, kBf16FixtureRtol = 0.05;

/// A device copy of @p values.
inline Tensor on_device(const std::vector<float>& values) { return cuda::upload(values); }

/// @p n device floats, every one a NaN until a kernel writes it.
inline Tensor poisoned(std::size_t n) {
  Tensor t = cuda::device_empty(DType::F32, {static_cast<std::int64_t>(n)});
  cuda::fill_bytes(t.data, 0xFF, t.nbytes());
  return t;
}

/// The elements of device tensor @p t (f32).
inline std::vector<float> on_host(const Tensor& t) {
  return cuda::download<float>(t.data, static_cast<std::size_t>(t.numel()));
}

/// @p v widened to double, the reference type of all_close().
inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

}  // namespace servelab::test
