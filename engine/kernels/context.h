// SPDX-License-Identifier: MIT
/**
 * @file context.h
 * @brief What every CPU kernel is given: the thread pool and the reduction mode.
 */
#pragma once

namespace servelab {

class ThreadPool;

/// Execution settings passed to every kernel call.
struct KernelContext {
  ThreadPool* pool = nullptr;  ///< threads to split work over (not owned)
  /**
   * When true, every reduction sums in an order fixed by the row alone, so a
   * row's result does not depend on how many rows share the batch (prefill
   * vs decode, cache vs no cache, batch of 1 vs 32). When false, GEMMs go to
   * OpenBLAS, whose blocking, and so rounding, changes with the matrix shape.
   */
  bool deterministic = false;
  /**
   * With bf16 weights, multiply in bf16 where the CPU has bf16 dot products
   * (AVX512_BF16): activations rounded to bf16, f32 accumulation, as the
   * CUDA path does; twice the f32 rate, error bound in kernels/gemm_dnnl.h.
   * When false, bf16 weights are widened to f32 and the result stays within
   * f32 rounding of the f32-weight path (the parity tests' tolerance).
   */
  bool bf16_activations = false;
  /**
   * With quantized weights (Q8_0, Q4_0, Q4_1), multiply in integers where the
   * row kernels run, as llama.cpp does: each input row rounded to 8 bits per
   * block of 32 (quantize_inputs()), exact int32 sums per block
   * (cpu::RowsInt8Kernel). When false, the blocks are widened to f32 in
   * registers and the result is the f32 path's on the dequantized weights.
   */
  bool int8_activations = false;
};

}  // namespace servelab
