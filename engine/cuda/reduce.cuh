// SPDX-License-Identifier: MIT
/**
 * @file reduce.cuh
 * @brief Block-wide reductions for the CUDA kernels: each warp combines its
 *        32 lanes with shuffles, then warp 0 combines the warps' results
 *        through shared memory. The combine step is a parameter, so a sum,
 *        an online-softmax merge and an argmax pick share one shape.
 *
 * Device code only (included by .cu files). Every thread of the block must
 * call block_reduce(), and blockDim.x must be a multiple of 32 (at most 1024).
 */
#pragma once

#include <cstddef>

namespace servelab::cuda {

/// Threads per block of the row-wise kernels: 8 warps.
inline constexpr int kBlockThreads = 256;

/// Blocks needed to cover @p n items with @p per_block items each.
inline unsigned blocks_for(std::size_t n, int per_block) {
  return static_cast<unsigned>((n + static_cast<std::size_t>(per_block) - 1) / static_cast<std::size_t>(per_block));
}

/// @p value of the lane whose index differs from this one's in bit @p offset; any trivially copyable T of 4-byte words.
template <typename T>
__device__ T shuffle_xor(T value, int offset) {
  static_assert(sizeof(T) % 4 == 0, "shuffled values are moved as 32-bit words");
  unsigned words[sizeof(T) / 4];
  memcpy(words, &value, sizeof(T));
  for (unsigned& w : words) w = __shfl_xor_sync(0xffffffffu, w, offset);
  memcpy(&value, words, sizeof(T));
  return value;
}

/// Combines @p value across the 32 lanes of a warp (a butterfly); every lane gets the result.
template <typename T, typename Combine>
__device__ T warp_reduce(T value, Combine combine) {
  for (int offset = 16; offset > 0; offset /= 2) value = combine(value, shuffle_xor(value, offset));
  return value;
}

/**
 * @brief Combines one value per thread across the block; every thread gets the result.
 * @param identity a value that @p combine leaves the other operand unchanged with.
 */
template <typename T, typename Combine>
__device__ T block_reduce(T value, Combine combine, T identity) {
  // Raw storage: __shared__ variables cannot have constructors, and T may have default member values.
  alignas(T) __shared__ unsigned char storage[32 * sizeof(T)];
  T* partial = reinterpret_cast<T*>(storage);  // [32] one per warp
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  value = warp_reduce(value, combine);
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  T total = lane < warps ? partial[lane] : identity;
  total = warp_reduce(total, combine);  // every warp reduces the partials: no second broadcast needed
  __syncthreads();                      // partial[] may be reused by the next call
  return total;
}

}  // namespace servelab::cuda
