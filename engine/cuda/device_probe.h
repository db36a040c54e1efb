// SPDX-License-Identifier: MIT
/**
 * @file device_probe.h
 * @brief Asks the CUDA runtime what devices exist: the first piece of the
 *        CUDA backend seam, compiled only where nvcc was found.
 */
#pragma once

#include <string>

namespace servelab {

/// Number of CUDA devices visible; 0 when there is none or the build has no CUDA.
int cuda_device_count();

/// One line for users: the devices found, or why there are none.
std::string cuda_device_summary();

}  // namespace servelab
