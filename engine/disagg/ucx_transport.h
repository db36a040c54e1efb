// SPDX-License-Identifier: MIT
/**
 * @file ucx_transport.h
 * @brief Transport over UCX's UCP API (Debian's libucx): put/get for WRITE
 *        and READ, tagged messages for SEND.
 *
 * Which wire UCX uses is chosen by the environment, not the code:
 * `UCX_TLS=tcp UCX_NET_DEVICES=lo` forces the network path on one machine,
 * `UCX_TLS=sm` shared memory (with cma), and on a cluster `UCX_TLS=rc,sm,self`
 * with `UCX_NET_DEVICES=mlx5_0:1` InfiniBand or RoCE. A CUDA-enabled UCX build
 * takes GPU addresses in register_memory() with no code change.
 *
 * Endpoints ask UCX for peer error handling (a dead peer fails the pending
 * operations) unless UCX_TLS names shared-memory transports only: UCX 1.13's
 * sm transports have no peer failure detection and would refuse the endpoint
 * with an ERROR line; there the transfer timeouts alone guard the waits.
 *
 * A peer's address and remote keys come from another process, and UCX 1.13
 * unpacks them trusting their bytes (an unknown address version is an
 * assertion, SIGABRT): add_peer() first unpacks them in a forked child with a
 * loopback-only UCX context, so garbage costs that child, and the Error names
 * UCX's own line; only then does this process connect.
 *
 * One thread at a time (UCS_THREAD_MODE_SERIALIZED): any thread may call,
 * never two at once (a LayerStreamer's thread sends while the worker's main
 * thread computes and leaves the transport alone). Progress happens only
 * inside the calls (busy polling, UCX's default).
 */
#pragma once

#include <map>
#include <memory>

#include "disagg/transport.h"

namespace servelab::disagg {

/// UCP context + worker, registered regions, one endpoint and key set per peer.
class UcxTransport final : public Transport {
 public:
  /// Creates the UCP context and worker. @throws Error with UCX's reason when either fails.
  UcxTransport();
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  int register_memory(void* base, std::size_t length) override;
  TransportInfo local_info() override;
  int add_peer(const TransportInfo& peer) override;
  void remove_peer(int peer) override;
  void write(int peer, std::span<const TransferDescriptor> descriptors, const TransferOptions& options) override;
  void read(int peer, std::span<const TransferDescriptor> descriptors, const TransferOptions& options) override;
  void send(int peer, std::uint64_t tag, std::span<const TransferDescriptor> descriptors,
            const TransferOptions& options) override;
  void recv(std::uint64_t tag, std::span<const TransferDescriptor> descriptors,
            const TransferOptions& options) override;
  void progress() override;

 private:
  struct State;  // the UCX handles (kept out of the header, so only this file includes ucp.h)
  std::unique_ptr<State> s_;
  /// write() (@p put) or read(): one put or get per piece, then a flush, waited for with the timeout.
  void one_sided(int peer, std::span<const TransferDescriptor> descriptors, const TransferOptions& options, bool put);
};

}  // namespace servelab::disagg
