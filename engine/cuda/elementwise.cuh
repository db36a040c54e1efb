// SPDX-License-Identifier: MIT
/**
 * @file elementwise.cuh
 * @brief The launch shape of the element-wise kernels: one thread per element, kBlockThreads a block,
 *        nothing launched for zero elements (a grid of 0 blocks is a launch error), the launch checked.
 *
 * Host code of .cu files only.
 */
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "cuda/check.h"
#include "cuda/reduce.cuh"

namespace servelab::cuda {

/**
 * @brief Launches @p kernel over @p n elements with @p args and checks the launch.
 * @param name the kernel's name, in the error a failed launch throws.
 */
template <typename... Params, typename... Args>
void launch_per_element(const char* name, void (*kernel)(Params...), std::size_t n, Args&&... args) {
  if (n == 0) return;
  kernel<<<blocks_for(n, kBlockThreads), kBlockThreads>>>(std::forward<Args>(args)...);
  check_cuda(cudaGetLastError(), ("launch of " + std::string(name)).c_str(), __FILE__, __LINE__);
}

}  // namespace servelab::cuda
