/**
 * @file machine.h
 * @brief This machine's own roofs, measured: memory bandwidth with
 *        STREAM-style loops and matrix throughput with the same OpenBLAS
 *        sgemm the engine uses.
 *
 * Measured, never assumed: on a shared VM they swing over minutes, so a
 * figure should be compared with roofs measured in the same run.
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

/**
 * @brief OpenBLAS sgemm GFLOP/s with @p threads OpenBLAS threads on an
 *        M×N×K product (one call; OpenBLAS is set back to one thread after).
 */
double measure_sgemm_gflops(int threads, int M, int N, int K);

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
