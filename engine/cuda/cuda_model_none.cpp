// Built instead of the CUDA backend's sources when CMake found no CUDA
// compiler: Model can still name CudaModel, and asking for it is a clear error.
#include "core/error.h"
#include "cuda/cuda_kv_cache.h"
#include "cuda/cuda_model.h"

namespace servelab {

struct CudaModel::State {};

CudaModel::CudaModel(const ModelConfig&, const ModelWeights&, const std::vector<float>&) {
  fail("--backend cuda: this build has no CUDA backend (nvcc was not found when it was configured); use --backend cpu");
}

CudaModel::~CudaModel() = default;

std::vector<float> CudaModel::forward(const Batch&, KVCache&) { fail("--backend cuda: this build has no CUDA backend"); }

std::unique_ptr<KVCache> CudaModel::make_kv_cache(int, int) const {
  fail("--backend cuda: this build has no CUDA backend");
}

bool is_device_kv_cache(const KVCache&) { return false; }

}  // namespace servelab
