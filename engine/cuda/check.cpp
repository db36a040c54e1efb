#include "cuda/check.h"

#include "core/error.h"

namespace servelab::cuda {

void check_cuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return;
  fail(call, " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ") at ", file, ":", line);
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail(call, " failed: ", cublasGetStatusName(status), " (", cublasGetStatusString(status), ") at ", file, ":", line);
}

}  // namespace servelab::cuda
