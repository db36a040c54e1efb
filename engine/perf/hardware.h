// SPDX-License-Identifier: MIT
/**
 * @file hardware.h
 * @brief Peak compute and memory bandwidth of the GPUs the course talks
 *        about, from their vendors' datasheets, and the roofline arithmetic
 *        on them.
 *
 * The roofline model: a kernel with arithmetic intensity I (FLOP per byte
 * moved) can reach at most min(peak FLOP/s, I × bandwidth). The ridge point
 * peak / bandwidth separates memory-bound kernels (I below it) from
 * compute-bound ones.
 * @see labs/03_roofline/README.md
 */
#pragma once

#include <string>
#include <vector>

namespace servelab {

/// One machine's roofs.
struct Hardware {
  std::string name;          ///< e.g. "A100 80GB SXM"
  double matrix_tflops = 0;  ///< dense fp16/bf16 tensor-core TFLOP/s with fp32 accumulation (no sparsity)
  double fp32_tflops = 0;    ///< plain fp32 TFLOP/s (no tensor cores)
  double bandwidth_gbs = 0;  ///< memory bandwidth, GB/s (10^9 bytes/s)
  double memory_gb = 0;      ///< memory size, GB
  std::string source;        ///< where the numbers come from

  /// Ridge point for matrix math, FLOP/byte: matrix_tflops / bandwidth.
  double ridge() const { return matrix_tflops * 1e12 / (bandwidth_gbs * 1e9); }
};

/// Datasheet entries: A100 40GB and 80GB, H100 SXM, H200 SXM, T4 (the free Colab GPU) and RTX 4090.
const std::vector<Hardware>& gpu_catalog();

/**
 * @brief The catalog entry named @p name.
 * @throws Error listing the known names when there is none.
 */
const Hardware& gpu(const std::string& name);

/// Which roof limits a kernel.
enum class Bound { Memory, Compute };

/// Memory-bound below the ridge point, compute-bound at or above it.
inline Bound bound_of(double intensity, double ridge) { return intensity < ridge ? Bound::Memory : Bound::Compute; }

/// "memory" or "compute".
inline const char* bound_name(Bound b) { return b == Bound::Memory ? "memory" : "compute"; }

/// The roofline: min(peak, intensity × bandwidth), in the units of @p peak_flops per second.
inline double attainable(double intensity, double peak_flops, double bandwidth_bytes) {
  const double memory_roof = intensity * bandwidth_bytes;
  return memory_roof < peak_flops ? memory_roof : peak_flops;
}

}  // namespace servelab
