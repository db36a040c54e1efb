// SPDX-License-Identifier: MIT
// Built instead of gemm_dnnl.cpp when CMake found no oneDNN (SERVELAB_DNNL=OFF or libdnnl-dev missing).
#include "core/error.h"
#include "kernels/gemm_dnnl.h"

namespace servelab {

bool dnnl_available() { return false; }

bool dnnl_bf16_arithmetic() { return false; }

void matmul_dnnl(const KernelContext&, float*, const float*, const Tensor&, int) {
  fail("matmul_dnnl: this build has no oneDNN (configure with libdnnl-dev installed and SERVELAB_DNNL=ON)");
}

std::string dnnl_kernel_name(const KernelContext&, DType, int, int, int) { return "oneDNN not built"; }

}  // namespace servelab
