// SPDX-License-Identifier: MIT
#include "cuda/check.h"

#include "core/error.h"
#include "cuda/device_memory.h"

namespace servelab::cuda {

void check_cuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return;
  // The runtime also keeps this error as its "last error"; left there, the next
  // CUDA_CHECK_LAUNCH would report it against an innocent kernel. Clear it
  // (a sticky error, a kernel fault, survives this and every later call).
  (void)cudaGetLastError();
  fail(call, " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ") at ", file, ":", line);
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  (void)cudaGetLastError();  // a CUDA error cuBLAS met inside the call: not the next launch's
  fail(call, " failed: ", cublasGetStatusName(status), " (", cublasGetStatusString(status), ") at ", file, ":", line);
}

bool error_pending() { return cudaPeekAtLastError() != cudaSuccess; }

}  // namespace servelab::cuda
