// SPDX-License-Identifier: MIT
/**
 * @file check.h
 * @brief Every CUDA runtime and cuBLAS call goes through one of these
 *        macros: a failure throws servelab::Error naming the call, the
 *        error and the file and line, so a run stops cleanly with one message
 *        instead of carrying on with garbage.
 *
 * Kernel launches return nothing; CUDA_CHECK_LAUNCH asks the runtime right
 * after each launch whether it was accepted (bad grid, no kernel image for
 * this GPU). A fault inside a running kernel surfaces at the next
 * synchronising call (usually the copy of the logits back to the host),
 * which is checked like any other.
 *
 * Only for sources compiled where CUDA exists (it includes the CUDA headers).
 */
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace servelab::cuda {

/// Throws Error("<call> failed: <name> (<description>) at <file>:<line>") unless @p err is cudaSuccess.
void check_cuda(cudaError_t err, const char* call, const char* file, int line);

/// Same for a cuBLAS status.
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace servelab::cuda

/// Checks a CUDA runtime call, e.g. CUDA_CHECK(cudaMalloc(&p, bytes)).
#define CUDA_CHECK(call) ::servelab::cuda::check_cuda((call), #call, __FILE__, __LINE__)
/// Checks a cuBLAS call, e.g. CUBLAS_CHECK(cublasCreate(&handle)).
#define CUBLAS_CHECK(call) ::servelab::cuda::check_cublas((call), #call, __FILE__, __LINE__)
/// Checks that the kernel launched just before was accepted; @p kernel names it in the error.
#define CUDA_CHECK_LAUNCH(kernel) \
  ::servelab::cuda::check_cuda(cudaGetLastError(), "launch of " kernel, __FILE__, __LINE__)
