// SPDX-License-Identifier: MIT
/**
 * @file counter.h
 * @brief Work counters: the FLOPs each op of a model step performs and the
 *        bytes it must move, counted from the shapes of the actual calls.
 *
 * Byte model (the minimum traffic an op needs, which is what a roofline
 * compares with memory bandwidth; caches may serve some of it for free, and a
 * naive kernel may move more):
 * - a GEMM reads its weight once ([N, K] in the weight dtype), reads its
 *   input ([M, K] f32) and writes its output ([M, N] f32);
 * - attention reads each query and each cached K and V row of its sequence
 *   once per layer, and writes its output;
 * - element-wise ops read their inputs and write their outputs once (f32).
 * FLOPs count a multiply-add as 2; element-wise ops count the arithmetic per
 * element listed in WorkCounter's implementation.
 * @see labs/03_roofline/README.md
 */
#pragma once

#include <map>
#include <string>

namespace servelab {

/// Work of one op (or of a whole step): FLOPs and bytes by kind of data.
struct Work {
  double flops = 0;         ///< floating-point operations (multiply-add = 2)
  double weight_bytes = 0;  ///< model parameters read
  double act_read = 0;      ///< activations read (f32)
  double act_written = 0;   ///< activations written (f32)
  double kv_read = 0;       ///< KV cache bytes read
  double kv_written = 0;    ///< KV cache bytes written

  /// All bytes moved.
  double bytes() const { return weight_bytes + act_read + act_written + kv_read + kv_written; }
  /// Arithmetic intensity, FLOP per byte (0 when nothing moved).
  double intensity() const { return bytes() > 0 ? flops / bytes() : 0.0; }
  /// Adds @p other field by field.
  Work& operator+=(const Work& other);
};

/// Accumulates Work per op name while it is enabled; the model calls add() at each op.
class WorkCounter {
 public:
  /// Counting costs a little per op, so it is off unless a lab or test turns it on.
  void enable(bool on) { enabled_ = on; }
  /// True while counting.
  bool enabled() const { return enabled_; }
  /// Forgets everything counted so far.
  void reset() { ops_.clear(); }
  /// Adds @p work to op @p op (no-op while disabled).
  void add(const std::string& op, const Work& work) {
    if (enabled_) ops_[op] += work;
  }
  /// Work by op name.
  const std::map<std::string, Work>& ops() const { return ops_; }
  /// Sum over all ops.
  Work total() const;

 private:
  bool enabled_ = false;
  std::map<std::string, Work> ops_;
};

}  // namespace servelab
