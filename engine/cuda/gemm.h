// SPDX-License-Identifier: MIT
/**
 * @file gemm.h
 * @brief The CUDA backend's GEMM seam: out = x · Wᵀ through cuBLAS
 *        (cublasGemmEx, f32 accumulation), the twin of kernels/gemm.h.
 *
 * The engine stores weights row-major [N, K] (Hugging Face's layout) and
 * activations row-major [M, K]; cuBLAS is column-major. A row-major matrix
 * is its transpose in column-major, so the call computes
 * \f$ out^T = W \cdot x^T \f$: A = W read as a column-major [K, N] matrix
 * and transposed (CUBLAS_OP_T), B = x as a column-major [K, M] matrix, C =
 * out as a column-major [N, M] matrix, with no copy of anything.
 *
 * Types (cuBLAS multiplies like types only):
 * | weights | x as cuBLAS sees it | compute | out |
 * |---|---|---|---|
 * | f32  | f32 | CUBLAS_COMPUTE_32F (full f32, never TF32) | f32 |
 * | bf16 | x rounded to bf16 by narrow_to() | CUBLAS_COMPUTE_32F on tensor cores | f32 |
 * | f16  | x rounded to f16 | CUBLAS_COMPUTE_32F on tensor cores | f32 |
 *
 * Why round the activations rather than widen the weights: a decode step
 * is bound by the bytes of weights it reads, and bf16 weights exist to halve
 * them. Widening W to f32 before each GEMM would read 2 bytes, write 4 and
 * read 4 again per weight; rounding x costs a few KB per step. It is what
 * PyTorch does when a model runs in bf16 (inputs in bf16, f32 accumulation).
 * The price: x loses bits (relative error up to 2⁻⁹ per element), so bf16
 * logits differ from the CPU's bf16 path (which widens W in registers and
 * keeps x in f32) by more than f32 rounding (tests/gpu states the bound).
 */
#pragma once

#include "core/tensor.h"

struct cublasContext;  // cuBLAS's handle type (cublasHandle_t is a pointer to it)

namespace servelab::cuda {

/// A cuBLAS handle and the scratch buffer for 16-bit GEMM inputs. Not thread-safe.
class Gemm {
 public:
  /**
   * @brief Creates the cuBLAS handle on the current device, bound to this
   *        thread's default stream with a workspace of its own.
   * @throws Error when cuBLAS cannot start (no handle is left behind).
   */
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  /**
   * @brief \f$ out = x W^T \f$ (a `torch.nn.Linear` without bias).
   * @param out [M, N] f32, overwritten (never read: NaNs in it do not leak through).
   * @param x   [M, K] f32 rows.
   * @param w   [N, K] weight in device memory: f32, bf16 or f16.
   * @param M   number of rows (tokens).
   */
  void matmul(float* out, const float* x, const Tensor& w, int M);

  /**
   * @brief The same product for an input already in @p w's 16-bit dtype (no narrowing).
   * @param x16 [M, K] bf16 or f16, matching @p w.
   */
  void matmul_16bit(float* out, const void* x16, const Tensor& w, int M);

  /**
   * @brief The product for an input already in @p w's dtype, whatever it is
   *        (f32 for f32 weights): what a fused kernel that emits the GEMM's
   *        input type feeds (cuda/ops.h's add_rmsnorm, silu_mul_to).
   * @param x [M, K] in w.dtype.
   */
  void matmul_as_weight(float* out, const void* x, const Tensor& w, int M);

  /**
   * @brief Sizes the narrowing scratch of matmul() for inputs of up to
   *        @p elements (M·K) now, so that later calls allocate nothing (a
   *        call inside a CUDA Graph capture must not).
   */
  void reserve(std::size_t elements);

  /// Bytes of the cuBLAS workspace each Gemm gives its handle (NVIDIA's advice for Hopper is 32 MiB).
  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

 private:
  cublasContext* handle_ = nullptr;
  Tensor workspace_;  // [kWorkspaceBytes] cuBLAS scratch, set with cublasSetWorkspace
  Tensor narrow_;     // [>= M * K] x rounded to the weight's 16-bit dtype; grows to the largest GEMM seen
};

}  // namespace servelab::cuda
