// SPDX-License-Identifier: MIT
/**
 * @file layer_streamer.h
 * @brief Layer-wise KV streaming: a request's KV leaves layer by layer, on a
 *        thread of its own, while the prefill's forward pass computes the
 *        layers after it (LMCache's and Mooncake's layer-wise transfer).
 *
 * The prefill worker makes one streamer per request, marks each layer done
 * from Model::set_layer_hook, and calls finish() after the forward pass. The
 * streamer writes each layer's descriptors as soon as it is marked, in
 * order, and records when each write ran, so the accounting can say how
 * much of the transfer happened while the forward pass was still running.
 * On two cores the sending thread competes with the compute threads; on a
 * GPU the copy engines and the NIC do the moving and the overlap is free.
 */
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "disagg/transport.h"

namespace servelab::disagg {

/// What a streamed transfer did, in now_seconds() time.
struct StreamStats {
  double busy_seconds = 0;        ///< sum of the layers' write times
  double overlapped_seconds = 0;  ///< of which inside [compute_start, compute_end]
  double end = 0;                 ///< when the last layer's write returned
};

/// Sends one request's KV, one layer at a time, from a thread of its own.
class LayerStreamer {
 public:
  /**
   * @param transport the transport to write with; the caller must not use it
   *        until finish() returns (UCX's serialized thread mode).
   * @param peer      the decode worker's transport handle.
   * @param layers    descriptors of each layer, [num_layers][...].
   * @param options   each layer's write: timeout and pacing.
   */
  LayerStreamer(Transport& transport, int peer, std::vector<std::vector<TransferDescriptor>> layers,
                TransferOptions options);
  /// Stops after the layer being written (if finish() was not called) and joins the thread.
  ~LayerStreamer();
  LayerStreamer(const LayerStreamer&) = delete;
  LayerStreamer& operator=(const LayerStreamer&) = delete;

  /// Layer @p layer's KV is final: it may be sent. Layers must be marked in order 0, 1, ...
  void layer_done(int layer);
  /**
   * @brief Waits until every layer has been written (all must have been marked done).
   * @param compute_start, compute_end the forward pass's interval, for the overlap.
   * @throws Error from the transport (the first layer that failed), or when a layer was never marked.
   */
  StreamStats finish(double compute_start, double compute_end);

 private:
  void run();

  Transport& transport_;
  int peer_;
  std::vector<std::vector<TransferDescriptor>> layers_;
  TransferOptions options_;
  std::mutex mutex_;
  std::condition_variable ready_;
  int num_ready_ = 0;                             // layers marked done
  bool stop_ = false;                             // the destructor's: no more layers will come
  std::vector<std::pair<double, double>> spans_;  // [start, end] of each layer's write
  std::exception_ptr error_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace servelab::disagg
