// Built instead of cuda_runtime_probe.cu when CMake found no CUDA compiler.
#include "kernels/cuda_runtime_probe.h"

namespace servelab {

int cuda_device_count() { return 0; }

std::string cuda_device_summary() { return "this build has no CUDA support: nvcc was not found when it was configured"; }

}  // namespace servelab
