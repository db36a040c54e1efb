// SPDX-License-Identifier: MIT
/**
 * @file hd.h
 * @brief One macro that lets a function compile for both the CPU and a CUDA
 *        kernel, so the math the two backends share is written once and the
 *        CPU tests exercise the exact code the kernels run.
 */
#pragma once

#if defined(__CUDACC__)
/// Marks a function callable from host code and from CUDA kernels.
#define SERVELAB_HD __host__ __device__ inline
#else
/// Marks a function callable from host code and from CUDA kernels.
#define SERVELAB_HD inline
#endif
