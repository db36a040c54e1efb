// SPDX-License-Identifier: MIT
// This GPU's roofs, measured (declared in perf/machine.h so labs need no CUDA header).
#include <functional>

#include "cuda/device_memory.h"
#include "cuda/gemm.h"
#include "core/timer.h"
#include "perf/machine.h"
#include "core/stats.h"

namespace servelab {

namespace {

// Median seconds of @p reps calls of @p fn after one warm-up; @p fn must end synchronised.
double median_seconds(int reps, const std::function<void()>& fn) { return summarize(time_runs(1, reps, fn)).median; }

}  // namespace

double measure_gpu_copy_gbs(int log2_floats, int reps) {
  const std::int64_t n = std::int64_t{1} << log2_floats;
  Tensor a = cuda::device_empty(DType::F32, {n}), b = cuda::device_empty(DType::F32, {n});
  cuda::fill_bytes(a.data, 0, a.nbytes());
  const double s = median_seconds(reps, [&] {
    cuda::copy_on_device(b.data, a.data, a.nbytes());
    cuda::synchronize();
  });
  return 2.0 * static_cast<double>(a.nbytes()) / s / 1e9;
}

double measure_gpu_gemm_tflops(int n, int reps) {
  Tensor w = cuda::device_empty(DType::BF16, {n, n}), x = cuda::device_empty(DType::BF16, {n, n});
  Tensor out = cuda::device_empty(DType::F32, {n, n});
  cuda::fill_bytes(w.data, 0x3c, w.nbytes());  // every element 0x3c3c, about 0.0115: finite, no denormals
  cuda::fill_bytes(x.data, 0x3c, x.nbytes());
  cuda::Gemm gemm;
  const double s = median_seconds(reps, [&] {
    gemm.matmul_16bit(out.as<float>(), x.data, w, n);
    cuda::synchronize();
  });
  return 2.0 * n * n * static_cast<double>(n) / s / 1e12;
}

}  // namespace servelab
