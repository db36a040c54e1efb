// SPDX-License-Identifier: MIT
// Lab 05's CUDA attention: v3 (flash prefill) and v4 (split-K decode) of the
// CPU progression (engine/kernels/attention_v3_flash.cpp, _v4_split_k.cpp),
// with the same online softmax (kernels/math/attention.h).
//
// Flash prefill, one block of 4 warps per (head, 32-row tile):
//   for each key tile of 32 (up to the tile's last row: causal tile skipping)
//     K_j, V_j -> shared memory (coalesced: a warp loads whole rows)       [Alg. 1 line 6]
//     each warp, for each of its 8 rows: lane j scores key j               [S = q K_jᵀ / sqrt(d)]
//       m' = max(m, rowmax S), P = exp(S - m'), l = l e^(m - m') + rowsum P [lines 9-10]
//       o = o e^(m - m') + P V_j, lane c owning columns c, c + 32, ...
//   O = o / l                                                              [line 12]
// Device memory per (tile, head): Q and O once, K and V up to the tile's
// last row once; S and P live in registers. K and V are still read once per
// head of a GQA group (the decode kernel shares them).
//
// Split-K decode, one block of 4 warps per (KV head, piece, row):
//   warp w takes keys w, w + 4, ... of the piece; lane c reads K[j][c + 32i]
//   (a whole row per warp, coalesced) and scores it against every query
//   head of the group (warp-sum), updating one (m, l, o) per head;
//   the warps' states merge in shared memory; a second kernel merges the
//   pieces per (row, head) by the log-sum-exp rule (online_softmax_merge).
// Device memory: K and V of the context once per KV head (the minimum), the
// pieces' states (d + 2 floats per head) written and read once.
#include <algorithm>

#include "core/error.h"
#include "cuda/attention_flash.h"
#include "cuda/check.h"
#include "kernels/math/attention.h"

namespace servelab::cuda {

namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kTileRows = 32, kRowsPerWarp = kTileRows / kWarps;  // query rows of a prefill block
constexpr int kTileKeys = 32;                                     // keys staged per step (one per lane)
constexpr int kCols = kFlashMaxHeadDim / 32;                      // output columns per lane

__device__ float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

/// Adds one key tile's scores (lane j holds key j's score s, -inf if masked) to a row's (m, l, o).
__device__ void online_tile(float s, const float* v_tile, int v_ld, int n, int D, float& m, float& l,
                            float (&o)[kCols]) {
  const float m_new = fmaxf(m, warp_max(s));
  if (m_new == -INFINITY) return;  // the row sees none of these keys
  const float rescale = expf(m - m_new);
  const float p = s == -INFINITY ? 0.0f : expf(s - m_new);
  l = l * rescale + warp_sum(p);
  m = m_new;
  for (int c = 0; c < kCols; ++c) o[c] *= rescale;
  for (int j = 0; j < n; ++j) {
    const float pj = __shfl_sync(0xffffffffu, p, j);
    for (int c = 0; c < kCols; ++c) {
      const int d = threadIdx.x % 32 + 32 * c;
      if (d < D) o[c] += pj * v_tile[j * v_ld + d];
    }
  }
}

__global__ void flash_prefill_kernel(float* out, const float* q, std::size_t q_stride, const AttentionRow* rows,
                                     const KVView* views, int T, int H, int group, int D, float scale) {
  extern __shared__ float smem[];
  float* k_tile = smem;                        // [kTileKeys, D + 1] (+1: lanes read a column without bank conflicts)
  float* v_tile = smem + kTileKeys * (D + 1);  // [kTileKeys, D]
  const int h = blockIdx.x, kvh = h / group, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int first = blockIdx.y * kTileRows, last = min(T, first + kTileRows) - 1;
  const bool one_seq = rows[first].seq == rows[last].seq;  // block-uniform
  // Each warp's rows: first + warp * kRowsPerWarp + i.
  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][kCols];
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
    for (int c = 0; c < kCols; ++c) o[i][c] = 0.0f;
  }
  if (one_seq) {
    const KVView kv = views[rows[first].seq];
    const int keys = rows[last].pos + 1;
    for (int t0 = 0; t0 < keys; t0 += kTileKeys) {
      const int n = min(kTileKeys, keys - t0);
      __syncthreads();  // the previous tile is no longer read
      for (int j = warp; j < n; j += kWarps)
        for (int d = lane; d < D; d += 32) {
          k_tile[j * (D + 1) + d] = kv.key(t0 + j)[kvh * D + d];
          v_tile[j * D + d] = kv.value(t0 + j)[kvh * D + d];
        }
      __syncthreads();
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const int t = first + warp * kRowsPerWarp + i;
        if (t > last || rows[t].pos < t0) continue;  // warp-uniform: past the batch, or above this tile
        const float* qr = q + static_cast<std::size_t>(t) * q_stride + h * D;
        float s = -INFINITY;
        if (lane < n && t0 + lane <= rows[t].pos) {
          float acc = 0.0f;
          for (int d = 0; d < D; ++d) acc += qr[d] * k_tile[lane * (D + 1) + d];
          s = acc * scale;
        }
        online_tile(s, v_tile, D, n, D, m[i], l[i], o[i]);
      }
    }
  } else {
    // Rows of two sequences in one tile: each warp reads its rows' keys straight from device memory.
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int t = first + warp * kRowsPerWarp + i;
      if (t > last) continue;
      const KVView kv = views[rows[t].seq];
      const float* qr = q + static_cast<std::size_t>(t) * q_stride + h * D;
      for (int t0 = 0; t0 <= rows[t].pos; t0 += 32) {
        const int n = min(32, rows[t].pos + 1 - t0);
        float s = -INFINITY;
        if (lane < n) s = dot(qr, kv.key(t0 + lane) + kvh * D, D) * scale;
        // V rows of this tile are read from device memory directly: row j at kv.value(t0 + j).
        const float m_new = fmaxf(m[i], warp_max(s));
        const float rescale = expf(m[i] - m_new), p = s == -INFINITY ? 0.0f : expf(s - m_new);
        l[i] = l[i] * rescale + warp_sum(p);
        m[i] = m_new;
        for (int c = 0; c < kCols; ++c) o[i][c] *= rescale;
        for (int j = 0; j < n; ++j) {
          const float pj = __shfl_sync(0xffffffffu, p, j);
          const float* v = kv.value(t0 + j) + kvh * D;
          for (int c = 0; c < kCols; ++c)
            if (lane + 32 * c < D) o[i][c] += pj * v[lane + 32 * c];
        }
      }
    }
  }
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int t = first + warp * kRowsPerWarp + i;
    if (t > last) continue;
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    for (int c = 0; c < kCols; ++c)
      if (lane + 32 * c < D) out[(static_cast<std::size_t>(t) * H + h) * D + lane + 32 * c] = o[i][c] * inv;
  }
}

/// Partial state of one (row, head, piece): m, l, then D floats of o.
__host__ __device__ std::size_t part_index(int t, int h, int piece, int H, int splits, int D) {
  return ((static_cast<std::size_t>(t) * H + h) * splits + piece) * (D + 2);
}

// MaxG: the group size rounded up to a power of two, so the per-head arrays are
// indexed by unrolled constants and stay in registers.
template <int MaxG>
__global__ void split_k_kernel(float* out, const float* q, std::size_t q_stride, const AttentionRow* rows,
                               const KVView* views, int H, int group, int D, float scale, int piece_keys, int splits,
                               float* parts) {
  __shared__ float merge_m[kWarps][MaxG], merge_l[kWarps][MaxG];
  extern __shared__ float merge_o[];  // [kWarps, group, D]
  const int kvh = blockIdx.x, piece = blockIdx.y, t = blockIdx.z, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const AttentionRow r = rows[t];
  const KVView kv = views[r.seq];
  const int begin = piece * piece_keys, end = min(r.pos + 1, begin + piece_keys);
  float m[MaxG], l[MaxG], o[MaxG][kCols], qv[MaxG][kCols];
#pragma unroll
  for (int g = 0; g < MaxG; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
    const float* qr = q + static_cast<std::size_t>(t) * q_stride + (kvh * group + g) * D;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      o[g][c] = 0.0f;
      qv[g][c] = g < group && lane + 32 * c < D ? qr[lane + 32 * c] : 0.0f;
    }
  }
  for (int j = begin + warp; j < end; j += kWarps) {
    // One key row per warp: lane c holds columns c, c + 32, ... (coalesced).
    float k[kCols], v[kCols];
    for (int c = 0; c < kCols; ++c) {
      const int d = lane + 32 * c;
      k[c] = d < D ? kv.key(j)[kvh * D + d] : 0.0f;
      v[c] = d < D ? kv.value(j)[kvh * D + d] : 0.0f;
    }
#pragma unroll
    for (int g = 0; g < MaxG; ++g) {
      if (g >= group) break;
      float part = 0.0f;
      for (int c = 0; c < kCols; ++c) part += qv[g][c] * k[c];
      const float s = warp_sum(part) * scale;
      // Online softmax, one key at a time (online_softmax_update's rule, o following).
      SoftmaxState st{m[g], l[g]};
      const SoftmaxStep step = online_softmax_update(st, s);
      m[g] = st.max;
      l[g] = st.sum;
      for (int c = 0; c < kCols; ++c) o[g][c] = o[g][c] * step.rescale + step.weight * v[c];
    }
  }
  // Merge the warps' states through shared memory, then one thread per (head, column) combines them.
#pragma unroll
  for (int g = 0; g < MaxG; ++g) {
    if (g >= group) break;
    if (lane == 0) merge_m[warp][g] = m[g], merge_l[warp][g] = l[g];
    for (int c = 0; c < kCols; ++c)
      if (lane + 32 * c < D) merge_o[(warp * group + g) * D + lane + 32 * c] = o[g][c];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < group * D; idx += kThreads) {
    const int g = idx / D, d = idx % D;
    SoftmaxState st;
    float acc = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const SoftmaxState piece_state{merge_m[w][g], merge_l[w][g]};
      if (piece_state.max == -INFINITY) continue;
      const SoftmaxState merged = online_softmax_merge(st, piece_state);
      acc = acc * expf(st.max - merged.max) + merge_o[(w * group + g) * D + d] * expf(piece_state.max - merged.max);
      st = merged;
    }
    const int h = kvh * group + g;
    if (splits == 1) {  // one piece: normalise and write the output directly
      out[(static_cast<std::size_t>(t) * H + h) * D + d] = st.sum > 0.0f ? acc / st.sum : 0.0f;
    } else {
      float* part = parts + part_index(t, h, piece, H, splits, D);
      if (d == 0) part[0] = st.max, part[1] = st.sum;
      part[2 + d] = acc;
    }
  }
}

__global__ void merge_pieces_kernel(float* out, const float* parts, int H, int D, int splits) {
  const int h = blockIdx.x, t = blockIdx.y;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    SoftmaxState st;
    float acc = 0.0f;
    for (int p = 0; p < splits; ++p) {
      const float* part = parts + part_index(t, h, p, H, splits, D);
      const SoftmaxState piece{part[0], part[1]};
      if (piece.max == -INFINITY) continue;  // a piece past this row's last key
      const SoftmaxState merged = online_softmax_merge(st, piece);
      acc = acc * expf(st.max - merged.max) + part[2 + d] * expf(piece.max - merged.max);
      st = merged;
    }
    out[(static_cast<std::size_t>(t) * H + h) * D + d] = st.sum > 0.0f ? acc / st.sum : 0.0f;
  }
}

int multiprocessors() {
  static const int count = [] {
    int device = 0, n = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      return 1;
    return std::max(1, n);
  }();
  return count;
}

template <int MaxG>
void launch_split_k(dim3 grid, std::size_t smem, float* out, const float* q, std::size_t q_stride,
                    const AttentionRow* rows, const KVView* views, int H, int group, int D, float scale, int piece_keys,
                    int splits, float* parts) {
  split_k_kernel<MaxG>
      <<<grid, kThreads, smem>>>(out, q, q_stride, rows, views, H, group, D, scale, piece_keys, splits, parts);
}

void check_heads(const AttentionHeads& heads, const char* who) {
  check(heads.num_kv_heads > 0 && heads.num_heads % heads.num_kv_heads == 0, who, ": ", heads.num_heads,
        " query heads do not split into groups of ", heads.num_kv_heads, " KV heads");
  check(heads.head_dim >= 1 && heads.head_dim <= kFlashMaxHeadDim, who, ": head_dim ", heads.head_dim,
        " is outside 1..", kFlashMaxHeadDim);
}

}  // namespace

void attention_flash_prefill(float* out, const float* q, std::size_t q_stride, const AttentionRow* rows,
                             const KVView* views, int T, const AttentionHeads& heads) {
  check_heads(heads, "cuda::attention_flash_prefill");
  if (T == 0) return;
  const int D = heads.head_dim;
  const std::size_t smem = sizeof(float) * kTileKeys * (2 * D + 1);
  flash_prefill_kernel<<<dim3(heads.num_heads, (T + kTileRows - 1) / kTileRows), kThreads, smem>>>(
      out, q, q_stride, rows, views, T, heads.num_heads, heads.num_heads / heads.num_kv_heads, D, attention_scale(D));
  CUDA_CHECK_LAUNCH("flash_prefill_kernel");
}

std::size_t split_k_scratch_floats(int T, int num_heads, int head_dim, int num_splits) {
  return static_cast<std::size_t>(T) * num_heads * num_splits * (head_dim + 2);
}

void attention_split_k_decode(float* out, const float* q, std::size_t q_stride, const AttentionRow* rows,
                              const KVView* views, int T, int max_keys, const AttentionHeads& heads, int num_splits,
                              float* scratch, std::size_t scratch_floats) {
  check_heads(heads, "cuda::attention_split_k_decode");
  const int H = heads.num_heads, KVH = heads.num_kv_heads, group = H / KVH, D = heads.head_dim;
  check(group <= kFlashMaxGroup, "cuda::attention_split_k_decode: ", group, " query heads per KV head, at most ",
        kFlashMaxGroup);
  if (T == 0) return;
  int splits = num_splits;
  if (splits <= 0) {  // two waves of blocks on this device, pieces of at least 256 keys
    const int sms = multiprocessors();
    splits = std::clamp((2 * sms + KVH * T - 1) / (KVH * T), 1, std::max(1, max_keys / 256));
  }
  while (splits > 1 && split_k_scratch_floats(T, H, D, splits) > scratch_floats) splits /= 2;
  check(splits <= 65535, "cuda::attention_split_k_decode: ", splits, " pieces exceed the grid's limit");
  const int piece_keys = (max_keys + splits - 1) / splits;
  const std::size_t smem = sizeof(float) * kWarps * group * D;
  const dim3 grid(KVH, splits, T);
  const float scale = attention_scale(D);
  if (group <= 2)
    launch_split_k<2>(grid, smem, out, q, q_stride, rows, views, H, group, D, scale, piece_keys, splits, scratch);
  else if (group <= 4)
    launch_split_k<4>(grid, smem, out, q, q_stride, rows, views, H, group, D, scale, piece_keys, splits, scratch);
  else if (group <= 8)
    launch_split_k<8>(grid, smem, out, q, q_stride, rows, views, H, group, D, scale, piece_keys, splits, scratch);
  else
    launch_split_k<16>(grid, smem, out, q, q_stride, rows, views, H, group, D, scale, piece_keys, splits, scratch);
  CUDA_CHECK_LAUNCH("split_k_kernel");
  if (splits > 1) {
    merge_pieces_kernel<<<dim3(H, T), std::min(D, 128)>>>(out, scratch, H, D, splits);
    CUDA_CHECK_LAUNCH("merge_pieces_kernel");
  }
}

void attention(float* out, const float* q, std::size_t q_stride, const AttentionRow* rows, const KVView* views, int T,
               int num_seqs, int max_keys, const AttentionHeads& heads, float* scratch, std::size_t scratch_floats) {
  if (T == num_seqs && heads.num_heads / std::max(1, heads.num_kv_heads) <= kFlashMaxGroup)
    attention_split_k_decode(out, q, q_stride, rows, views, T, max_keys, heads, 0, scratch, scratch_floats);
  else
    attention_flash_prefill(out, q, q_stride, rows, views, T, heads);
}

}  // namespace servelab::cuda
