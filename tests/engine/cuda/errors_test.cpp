// SPDX-License-Identifier: MIT
// Built with the CUDA backend. On a machine with no GPU every CUDA call
// fails, which exercises the error path: each failure must name the call,
// CUDA's error name and text, and the file:line, as one servelab::Error.
#include "core/error.h"
#include "cuda/device_memory.h"
#include "cuda/gemm.h"
#include "cuda/device_probe.h"
#include "config/model_config.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("a failed CUDA runtime call names the call, the error and file:line", "[cuda]") {
  if (cuda_device_count() > 0) return;  // needs a machine where CUDA calls fail
  REQUIRE_ERROR_MENTIONS(cuda::device_empty(DType::F32, {4}), "cudaMalloc(&p, bytes) failed: cuda",
                         "device_memory.cpp:");
}

TEST_CASE("a failed cuBLAS call names the call and the cuBLAS status", "[cuda]") {
  if (cuda_device_count() > 0) return;
  REQUIRE_ERROR_MENTIONS(cuda::Gemm(), "cublasCreate(&handle) failed: CUBLAS_STATUS_", "gemm.cpp:");
}
