// SPDX-License-Identifier: MIT
#include "cuda/gemm.h"

#include <climits>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/device_memory.h"
#include "cuda/ops.h"

namespace servelab::cuda {

namespace {

cudaDataType cuda_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1: break;  // refused before upload (Model): the GPU path has no quantized GEMM yet
  }
  fail("cuda::Gemm: unsupported dtype ", dtype_name(dtype));
}

// out [M, N] = x [M, K] · W [N, K]ᵀ, row-major, as the column-major outᵀ = W·xᵀ (see gemm.h).
void gemm_ex(cublasHandle_t handle, float* out, const void* x, const Tensor& w, int M) {
  check(w.device == Device::CUDA && w.shape.size() == 2, "cuda::Gemm: weight ", w.shape_str(),
        " must be a matrix in device memory");
  check(w.shape[0] <= INT_MAX && w.shape[1] <= INT_MAX, "cuda::Gemm: weight ", w.shape_str(), " too large for cuBLAS");
  const int N = static_cast<int>(w.shape[0]), K = static_cast<int>(w.shape[1]);
  if (M == 0 || N == 0) return;
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: out is written, never read
  const cudaDataType type = cuda_type(w.dtype);
  CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w.data, type, K, x, type, K, &beta, out,
                            CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

Gemm::Gemm() {
  cublasHandle_t handle = nullptr;
  CUBLAS_CHECK(cublasCreate(&handle));
  // The destructor does not run when a constructor throws: destroy the handle here if a setting fails.
  try {
    // Default math: CUBLAS_COMPUTE_32F then means f32 products, not TF32, for f32 weights.
    CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
    // The stream the engine's kernels use (device_memory.h), so a CUDA Graph captures the GEMMs with them.
    CUBLAS_CHECK(cublasSetStream(handle, cudaStreamPerThread));
    // A workspace of our own: cuBLAS must not allocate one while a graph is being captured.
    workspace_ = device_empty(DType::F32, {static_cast<std::int64_t>(kWorkspaceBytes / 4)});
    CUBLAS_CHECK(cublasSetWorkspace(handle, workspace_.data, kWorkspaceBytes));
  } catch (...) {
    cublasDestroy(handle);
    throw;
  }
  handle_ = handle;
}

Gemm::~Gemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);  // not checked: a destructor must not throw
}

void Gemm::matmul(float* out, const float* x, const Tensor& w, int M) {
  if (w.dtype == DType::F32) {
    gemm_ex(handle_, out, x, w, M);
    return;
  }
  const std::size_t n = static_cast<std::size_t>(M) * static_cast<std::size_t>(w.shape.at(1));
  reserve(n);
  narrow_to(narrow_.data, w.dtype, x, n);
  gemm_ex(handle_, out, narrow_.data, w, M);
}

void Gemm::reserve(std::size_t elements) {
  if (!narrow_.empty() && static_cast<std::size_t>(narrow_.numel()) >= elements) return;
  narrow_ = device_empty(DType::BF16, {static_cast<std::int64_t>(elements)});  // holds f16 too: same size
}

void Gemm::matmul_as_weight(float* out, const void* x, const Tensor& w, int M) { gemm_ex(handle_, out, x, w, M); }

void Gemm::matmul_16bit(float* out, const void* x16, const Tensor& w, int M) {
  check(w.dtype == DType::BF16 || w.dtype == DType::F16, "cuda::Gemm::matmul_16bit: weight is ", dtype_name(w.dtype),
        ", not bf16 or f16");
  gemm_ex(handle_, out, x16, w, M);
}

}  // namespace servelab::cuda
