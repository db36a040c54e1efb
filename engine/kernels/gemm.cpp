#include "kernels/gemm.h"

#include <cblas.h>

#include "core/thread_pool.h"

namespace servelab {

namespace {

// dot(a, b) over k elements; the order of additions depends on k only.
float dot_fixed_order(const float* a, const float* b, int k) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= k; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  for (int j = 0; i < k; ++i, ++j) acc[j] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

void matmul_rowwise(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M) {
  const int N = static_cast<int>(w.shape[0]), K = static_cast<int>(w.shape[1]);
  const float* wd = w.as<const float>();
  ctx.pool->parallel_for(static_cast<std::size_t>(N), [&](std::size_t n0, std::size_t n1) {
    // n outer, m inner: one weight row is read from memory once and reused for every token.
    for (std::size_t n = n0; n < n1; ++n)
      for (int m = 0; m < M; ++m)
        out[static_cast<std::size_t>(m) * N + n] = dot_fixed_order(x + static_cast<std::size_t>(m) * K, wd + n * K, K);
  });
}

void matmul(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M) {
  if (ctx.deterministic) {
    matmul_rowwise(ctx, out, x, w, M);
    return;
  }
  const int N = static_cast<int>(w.shape[0]), K = static_cast<int>(w.shape[1]);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w.as<const float>(), K, 0.0f, out, N);
}

void add_bias(float* out, const float* bias, int M, int N) {
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) out[static_cast<std::size_t>(m) * N + n] += bias[n];
}

}  // namespace servelab
