// SPDX-License-Identifier: MIT
// Built instead of the CUDA backend's sources when CMake found no CUDA
// compiler: asking for the backend is a clear error.
#include "core/error.h"
#include "model/backend.h"

namespace servelab {

std::unique_ptr<ModelBackend> make_cuda_backend(const ModelConfig&, const ModelWeights&, const std::vector<float>&) {
  fail(
      "--backend cuda: no usable CUDA device (this build has no CUDA backend: nvcc was not found when it was "
      "configured); use --backend cpu");
}

}  // namespace servelab
