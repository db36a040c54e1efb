// SPDX-License-Identifier: MIT
/**
 * @file machine.h
 * @brief This machine's own roofs, measured: memory bandwidth with
 *        STREAM-style loops and arithmetic throughput with chains of FMAs
 *        (or bf16 dot products) on the widest vector unit.
 *
 * Measured, never assumed: on a shared VM they swing over minutes, so a
 * figure should be compared with roofs measured in the same run. The
 * compute roof is the engine's own loop, not a library GEMM: a library that
 * falls back to slow kernels on an unknown CPU model would otherwise lower
 * the roof with the figure and read as "94% of the limit".
 */
#pragma once

#include <cstddef>

namespace servelab {

class ThreadPool;

/**
 * @brief Streaming read: GB/s summing a buffer far larger than any cache,
 *        split over the pool's threads (one pass; call it a few times).
 */
double measure_read_gbs(ThreadPool& pool);

/**
 * @brief STREAM triad a[i] = b[i] + s·c[i] over three 256 MiB f32 arrays,
 *        GB/s counted as STREAM does (two reads and one write per element).
 */
double measure_triad_gbs(ThreadPool& pool);

/// The arithmetic a compute roof is measured for.
enum class PeakOp {
  F32Fma,   ///< f32 fused multiply-add on the active instruction set's widest registers (2 FLOP per lane)
  Bf16Dot,  ///< AVX512_BF16 vdpbf16ps: pairs of bf16 products added into f32 (4 FLOP per f32 lane)
};

/**
 * @brief Peak GFLOP/s of @p op: every pool thread runs twelve independent
 *        chains of it (more than latency × throughput, so the unit never
 *        waits) for about 2^24 steps, all registers, no memory traffic.
 *
 * F32Fma follows cpu::active_isa() (SERVELAB_ISA): 16 lanes on AVX-512, 8
 * on AVX2, plain multiply and add in C++ on generic. Real GEMMs reach
 * 85-95% of it at best.
 * @return 0 for Bf16Dot when the CPU has no AVX512_BF16 or the active
 *         instruction set is not AVX-512.
 */
double measure_peak_gflops(ThreadPool& pool, PeakOp op);

/**
 * @brief This GPU's memory roof: device-to-device copy of 2^log2_floats f32,
 *        GB/s counting bytes read and written, median of @p reps copies.
 * @throws Error when the build has no CUDA or there is no device.
 */
double measure_gpu_copy_gbs(int log2_floats = 28, int reps = 5);

/**
 * @brief This GPU's matrix roof: a cuBLAS bf16 n×n×n GEMM with f32
 *        accumulation, TFLOP/s, median of @p reps products.
 * @throws Error when the build has no CUDA or there is no device.
 */
double measure_gpu_gemm_tflops(int n = 8192, int reps = 5);

}  // namespace servelab
