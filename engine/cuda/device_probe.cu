// SPDX-License-Identifier: MIT
#include <cuda_runtime.h>

#include <sstream>

#include "cuda/device_probe.h"

namespace servelab {

int cuda_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::string cuda_device_summary() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  std::ostringstream os;
  if (err != cudaSuccess) {
    os << "no CUDA device: cudaGetDeviceCount failed with " << cudaGetErrorString(err);
    return os.str();
  }
  os << n << " CUDA device(s)";
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess)
      os << (i ? ", " : ": ") << prop.name << " (sm_" << prop.major << prop.minor << ")";
  }
  return os.str();
}

}  // namespace servelab
