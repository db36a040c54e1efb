// SPDX-License-Identifier: MIT
// Built instead of roofs.cpp when CMake found no CUDA compiler.
#include "core/error.h"
#include "perf/machine.h"

namespace servelab {

double measure_gpu_copy_gbs(int, int) { fail("GPU roofs: this build has no CUDA support (nvcc was not found)"); }

double measure_gpu_gemm_tflops(int, int) { fail("GPU roofs: this build has no CUDA support (nvcc was not found)"); }

}  // namespace servelab
