// SPDX-License-Identifier: MIT
/**
 * @file graph.h
 * @brief CUDA Graphs for the decode step: the step's ~400 launches are
 *        recorded once per batch shape and replayed with one launch.
 *
 * A decode step of a small model is launch-bound: each kernel takes a few
 * microseconds to launch and a few to run. A graph replays the whole recorded
 * sequence from the device side, so the host pays one launch per step. What a
 * replay cannot change are the launches' arguments: sizes and device
 * pointers are frozen at capture. CudaModel therefore keys its graphs by the
 * batch's shape, and keeps every per-step input (token ids, positions, block
 * tables, KV views) at fixed device addresses that it rewrites before each
 * replay.
 * @verbatim
 *  first step of shape k:  begin capture ─ record() queues every op (nothing runs) ─ end ─ instantiate ─ launch
 *  later steps of shape k: upload the step's inputs to the same addresses ─ launch
 * @endverbatim
 * Plain C++ interface; works on the calling thread's default stream
 * (cudaStreamPerThread, see device_memory.h).
 */
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>

struct CUgraphExec_st;  // CUDA's executable graph (cudaGraphExec_t points to one)

namespace servelab::cuda {

/// Executable graphs by key; not thread-safe.
class GraphCache {
 public:
  /// At most this many shapes get a graph; later new shapes run eagerly (each graph holds device memory).
  static constexpr std::size_t kMaxGraphs = 64;

  GraphCache() = default;
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  /**
   * @brief Runs the ops @p record queues: replays the graph of @p key if one
   *        exists, else captures @p record into one and launches it.
   *
   * @p record must only queue work on this thread's default stream (kernels,
   * cuBLAS calls on a handle bound to it, async copies): no allocation, no
   * synchronising call. Returns once the work is queued.
   * @throws Error naming the failed CUDA call (the capture is abandoned and nothing is cached).
   */
  void run(std::uint64_t key, const std::function<void()>& record);

  /// Destroys every graph: needed when a buffer that a graph points at moves.
  void clear();

  /// Graphs held.
  std::size_t size() const { return graphs_.size(); }
  /// Captures so far (each a new graph).
  long captures() const { return captures_; }
  /// Replays so far.
  long replays() const { return replays_; }

 private:
  std::unordered_map<std::uint64_t, CUgraphExec_st*> graphs_;
  long captures_ = 0, replays_ = 0;
};

}  // namespace servelab::cuda
