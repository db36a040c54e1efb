// SPDX-License-Identifier: MIT
#include "kernels/ops.h"

#include "core/thread_pool.h"
#include "kernels/cpu/silu.h"
#include "kernels/math/rmsnorm.h"
#include "kernels/math/rope.h"

namespace servelab {

void rmsnorm(const KernelContext& ctx, float* out, const float* x, const float* weight, int T, int n, float eps) {
  ctx.pool->parallel_for(static_cast<std::size_t>(T), [&](std::size_t t0, std::size_t t1) {
    for (std::size_t t = t0; t < t1; ++t) {
      const float* row = x + t * n;
      float* dst = out + t * n;
      const float inv = rms_inv(row, n, eps);
      for (int i = 0; i < n; ++i) dst[i] = rmsnorm_scale(row[i], inv, weight[i]);
    }
  });
}

void rope(const KernelContext& ctx, float* x, const int* positions, int T, int num_heads, int head_dim,
          const float* inv_freq) {
  const std::size_t rows = static_cast<std::size_t>(T) * num_heads;
  // A decode step rotates a dozen heads: not worth waking a thread for.
  ctx.pool->parallel_for(
      rows,
      [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r)
          rope_rotate_head(x + r * head_dim, head_dim, inv_freq, positions[r / num_heads]);
      },
      /*min_per_thread=*/64);
}

void silu_mul(const KernelContext& ctx, float* out, const float* gate_up, int T, int F) {
  // Deterministic mode keeps libm's expf (cpu/silu.h).
  const cpu::SiluMulKernel kernel = cpu::silu_mul_kernel(ctx.deterministic ? cpu::Isa::Generic : cpu::active_isa());
  ctx.pool->parallel_for(static_cast<std::size_t>(T), [&](std::size_t t0, std::size_t t1) {
    for (std::size_t t = t0; t < t1; ++t) kernel(out + t * F, gate_up + t * 2 * F, gate_up + t * 2 * F + F, F);
  });
}

void add_inplace(float* x, const float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace servelab
