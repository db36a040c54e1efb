// SPDX-License-Identifier: MIT
// Fused kernels of the decode step: each replaces two or three kernels that
// read the same data again, because a decode step (T = batch size, a few
// rows) is bound by bytes moved and by launches, not by arithmetic.
//
// 1. qkv_bias_rope_kv_write, one block per token row: bias add, RoPE on the q
//    and k heads, q written back for attention, k and v written to the cache.
//    Before: add_bias (read + write qkv), rope (read + write q, k), kv_write
//    (read k, v; write cache): 3 launches, qkv read 3 times. Now: 1 launch,
//    qkv read once; writes q (T·q_dim) and the cache rows (2·T·kv_dim).
// 2. add_rmsnorm, one block per row: x += y, then RMSNorm of the new x,
//    stored in the next GEMM's input type (bf16 for bf16 weights). Before:
//    add_inplace, rmsnorm, narrow_to: 3 launches, 5 passes over the row.
//    Now: 1 launch; reads x, y, writes x and the 2-byte GEMM input.
// 3. silu_mul_to: silu_mul storing straight into the down GEMM's input type
//    (saves narrow_to's launch and its f32 write and read).
// The per-element math is kernels/math's, shared with the CPU and the unfused
// kernels, so only the bf16 rounding point (the same f32_to_bf16) is new.
#include <cuda_fp16.h>

#include "core/dtype.h"
#include "core/error.h"
#include "cuda/check.h"
#include "cuda/ops.h"
#include "cuda/reduce.cuh"
#include "kernels/math/rmsnorm.h"
#include "kernels/math/rope.h"

namespace servelab::cuda {

namespace {

// Stores one activation in the GEMM input type.
__device__ void store(float* out, float v) { *out = v; }
__device__ void store(std::uint16_t* out, float v) { *out = f32_to_bf16(v); }
__device__ void store(__half* out, float v) { *out = __float2half_rn(v); }

__global__ void qkv_epilogue_kernel(float* qkv, const float* bias, const AttentionRow* rows, const KVView* views, int H,
                                    int KVH, int D, const float* inv_freq) {
  const std::size_t t = blockIdx.x;
  const int half = D / 2, Q = H * D, KV = KVH * D;
  float* row = qkv + t * static_cast<std::size_t>(Q + 2 * KV);  // [q heads | k heads | v heads]
  const AttentionRow r = rows[t];
  const KVView view = views[r.seq];
  float* k_cache = view.key(r.pos);    // [kv_dim]
  float* v_cache = view.value(r.pos);  // [kv_dim]
  const int pairs = (H + KVH) * half;  // rotated pairs of the q and k heads (k heads follow q heads)
  for (int p = threadIdx.x; p < pairs + KV; p += blockDim.x) {
    if (p < pairs) {
      const int head = p / half, i = p % half, a = head * D + i, b = a + half;  // columns of the pair
      float pair[2] = {row[a], row[b]};
      if (bias != nullptr) pair[0] += bias[a], pair[1] += bias[b];
      rope_rotate_pair(pair, 1, 0, rope_angle(r.pos, inv_freq[i]));  // the pair as a head of width 2
      if (head < H) {
        row[a] = pair[0];
        row[b] = pair[1];
      } else {
        k_cache[a - Q] = pair[0];
        k_cache[b - Q] = pair[1];
      }
    } else {
      const int e = p - pairs, col = Q + KV + e;
      v_cache[e] = bias != nullptr ? row[col] + bias[col] : row[col];
    }
  }
}

template <typename Out>
__global__ void add_rmsnorm_kernel(float* x, const float* y, const float* weight, Out* out, int n, float eps) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * n;
  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float v = x[base + i];
    if (y != nullptr) x[base + i] = v = v + y[base + i];
    sum_sq += v * v;
  }
  sum_sq = block_reduce(
      sum_sq, [](float a, float b) { return a + b; }, 0.0f);
  const float inv = rms_inv_from_sum_sq(sum_sq, n, eps);
  // Each thread reads back only the elements it wrote: no barrier needed.
  for (int i = threadIdx.x; i < n; i += blockDim.x) store(out + base + i, rmsnorm_scale(x[base + i], inv, weight[i]));
}

template <typename Out>
__global__ void silu_mul_to_kernel(Out* out, const float* gate_up, std::size_t total, int F) {
  const std::size_t idx = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const std::size_t t = idx / F, i = idx % F;
  const float* row = gate_up + t * 2 * F;  // [gate (F) | up (F)]
  store(out + idx, swiglu(row[i], row[F + i]));
}

void check_out_dtype(DType dtype, const char* op) {
  check(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16, "cuda::", op,
        ": output must be f32, bf16 or f16, got ", dtype_name(dtype));
}

}  // namespace

void qkv_bias_rope_kv_write(float* qkv, const float* bias, const AttentionRow* rows, const KVView* views, int T,
                            const AttentionHeads& heads, const float* inv_freq) {
  check(heads.head_dim % 2 == 0, "cuda::qkv_bias_rope_kv_write: head_dim ", heads.head_dim, " is odd");
  if (T == 0) return;
  qkv_epilogue_kernel<<<T, kBlockThreads>>>(qkv, bias, rows, views, heads.num_heads, heads.num_kv_heads, heads.head_dim,
                                            inv_freq);
  CUDA_CHECK_LAUNCH("qkv_epilogue_kernel");
}

void add_rmsnorm(float* x, const float* y, const float* weight, void* out, DType out_dtype, int T, int n, float eps) {
  check_out_dtype(out_dtype, "add_rmsnorm");
  if (T == 0) return;
  if (out_dtype == DType::F32)
    add_rmsnorm_kernel<<<T, kBlockThreads>>>(x, y, weight, static_cast<float*>(out), n, eps);
  else if (out_dtype == DType::BF16)
    add_rmsnorm_kernel<<<T, kBlockThreads>>>(x, y, weight, static_cast<std::uint16_t*>(out), n, eps);
  else
    add_rmsnorm_kernel<<<T, kBlockThreads>>>(x, y, weight, static_cast<__half*>(out), n, eps);
  CUDA_CHECK_LAUNCH("add_rmsnorm_kernel");
}

void silu_mul_to(void* out, DType out_dtype, const float* gate_up, int T, int F) {
  check_out_dtype(out_dtype, "silu_mul_to");
  const std::size_t total = static_cast<std::size_t>(T) * F;
  if (total == 0) return;
  const unsigned blocks = blocks_for(total, kBlockThreads);
  if (out_dtype == DType::F32)
    silu_mul_to_kernel<<<blocks, kBlockThreads>>>(static_cast<float*>(out), gate_up, total, F);
  else if (out_dtype == DType::BF16)
    silu_mul_to_kernel<<<blocks, kBlockThreads>>>(static_cast<std::uint16_t*>(out), gate_up, total, F);
  else
    silu_mul_to_kernel<<<blocks, kBlockThreads>>>(static_cast<__half*>(out), gate_up, total, F);
  CUDA_CHECK_LAUNCH("silu_mul_to_kernel");
}

}  // namespace servelab::cuda
