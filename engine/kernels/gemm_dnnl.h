// SPDX-License-Identifier: MIT
/**
 * @file gemm_dnnl.h
 * @brief The prefill GEMM on oneDNN's matmul primitive: blocked kernels
 *        chosen from the CPU's instruction-set features, never from its model
 *        number.
 *
 * What changed from matmul_blas() (gemm.h): the library. Debian's OpenBLAS
 * 0.3.21 picks its kernels from the CPU model; on a model it does not know
 * (the 2026 Xeons and EPYCs these labs run on) it falls back to generic SSE3
 * kernels at 15-25% of the core's FMA peak. oneDNN's brgemm kernels are JIT
 * compiled for the instruction sets the CPU reports (AVX2, AVX-512,
 * AVX512_BF16, AMX), so they reach 85-95% of that peak on any of them.
 *
 * How it runs:
 * - Weights stay where they are, [N, K] row-major as Hugging Face stores
 *   them; oneDNN reads them as a transposed [K, N] matrix through strides, so
 *   there is no second copy of the model. The layout oneDNN would rather
 *   have (format_tag::any, reordered once) was 5-8% faster in a probe on
 *   the qwen2.5-0.5b shapes; that is the price of not doubling the weights.
 * - One primitive per shape, created once and cached (creating one costs
 *   0.3-0.9 ms, a 512-token matmul on 896 × 896 a few ms).
 * - Threads: the engine's pool splits the M input rows (at least 16 per
 *   thread); every worker runs a one-thread primitive on its rows, all of
 *   N, so it writes whole rows of out: oneDNN 2.6 runs brgemm only on a
 *   dense destination (a column slice falls back to gemm:jit). Debian's
 *   oneDNN threads with OpenMP; each worker sets its own OpenMP team size to
 *   1, so the engine never has two pools on the same cores.
 * - bf16 weights: with KernelContext::bf16_activations, where the CPU has
 *   AVX512_BF16, the activations are rounded to bf16 and the product runs in
 *   bf16 with f32 accumulation (vdpbf16ps, twice the f32 FMA rate), as the
 *   CUDA path does. Otherwise (the default, and wherever bf16 arithmetic is
 *   emulated or missing) each worker widens the weight rows to f32 a panel
 *   at a time and runs the f32 primitive on the panel.
 *
 * Error: f32 weights, as any f32 GEMM (K roundings at 2^-24). bf16
 * arithmetic adds the rounding of each activation to bf16, at most 2^-8
 * relative (8 significant bits, round to nearest):
 * |out − exact| ≤ (2^-8 + K·2^-24) · Σ_k |x_k · w_k|.
 *
 * @see labs/03_roofline/README.md
 */
#pragma once

#include <string>

#include "core/tensor.h"
#include "kernels/context.h"

namespace servelab {

/**
 * @brief True when this build has oneDNN and the active instruction set
 *        (cpu::active_isa(), SERVELAB_ISA) is AVX2 or wider.
 *
 * oneDNN is limited to the active instruction set, so SERVELAB_ISA=avx2
 * runs its AVX2 kernels on an AVX-512 CPU; with SERVELAB_ISA=generic it is
 * not used.
 */
bool dnnl_available();

/**
 * @brief True when this CPU multiplies bf16 natively, so bf16 weights under
 *        KernelContext::bf16_activations run in bf16 arithmetic; false when
 *        they are widened to f32 whatever the context says.
 *
 * True where the CPU has AVX512_BF16 (or AMX) and the active instruction
 * set is AVX-512: measured on an EPYC (Zen 4) core, oneDNN's bf16 matmul ran
 * at 170-200 GFLOP/s against 90-105 for f32 on the same shapes; without
 * AVX512_BF16 oneDNN emulates it or has no kernel.
 */
bool dnnl_bf16_arithmetic();

/**
 * @brief \f$ out = x W^T \f$ on oneDNN, same contract as matmul() (gemm.h).
 * @param out [M, N] result, overwritten.
 * @param x   [M, K] input rows (f32).
 * @param w   [N, K] weight, f32 or bf16, row-major as stored.
 * @param M   number of rows, ≥ 1.
 * @throws Error when dnnl_available() is false or the weight is neither f32 nor bf16.
 */
void matmul_dnnl(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M);

/**
 * @brief The implementation oneDNN picks for one thread's share of this
 *        product (its impl_info_str, e.g. "brg:avx512_core"), so a
 *        benchmark can show which kernel ran.
 * @return "oneDNN not built" or "oneDNN not used (ISA ...)" when dnnl_available() is false.
 */
std::string dnnl_kernel_name(const KernelContext& ctx, DType weight_dtype, int M, int N, int K);

}  // namespace servelab
