// SPDX-License-Identifier: MIT
// Built instead of device_probe.cu when CMake found no CUDA compiler.
#include "cuda/device_probe.h"

namespace servelab {

int cuda_device_count() { return 0; }

std::string cuda_device_summary() {
  return "this build has no CUDA support: nvcc was not found when it was configured";
}

}  // namespace servelab
