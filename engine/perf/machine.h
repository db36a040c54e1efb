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

}  // namespace servelab
