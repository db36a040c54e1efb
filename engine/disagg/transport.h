// SPDX-License-Identifier: MIT
/**
 * @file transport.h
 * @brief The KV data plane between a prefill and a decode worker, shaped like
 *        NVIDIA NIXL: register memory once, swap keys once per peer, then move
 *        lists of (local, remote) descriptors per request.
 *
 * Real disaggregated servers keep the bytes off the control plane. A worker
 * registers its whole KV pool at start-up (pinning is expensive on RDMA
 * hardware, so it happens once), sends its TransportInfo to the peers it
 * will talk to (through the router), and from then on a request's KV move is
 * only a descriptor list:
 * @verbatim
 *  WRITE  prefill puts its blocks into the blocks decode set aside, flushes,
 *         then says KV_READY            (SGLang, Mooncake, TensorRT-LLM, LMCache)
 *  READ   decode gets the blocks from prefill, then says READ_DONE so that
 *         prefill may free them         (vLLM's NixlConnector)
 *  SEND   two-sided tagged send/recv: both sides post one operation per
 *         descriptor                    (NCCL, MPI; UCX rendezvous)
 * @endverbatim
 * Every wait has a deadline: a peer that died or never posts its receive
 * costs a timeout and an Error, never a hang (TensorRT-LLM #12988, nixl #2047).
 * @see labs/07_disaggregation/README.md
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace servelab::disagg {

/// How a request's KV moves (`--kv-transfer`).
enum class TransferMode { WRITE, READ, SEND };

/// "write", "read" or "send".
const char* to_string(TransferMode mode);
/// Parses @p text as a TransferMode. @throws Error naming @p what when it is none of the three.
TransferMode parse_transfer_mode(const std::string& text, const std::string& what);

/// One registered region as a peer sees it.
struct RemoteRegion {
  std::uint64_t base = 0;    ///< virtual address in the owner's process
  std::uint64_t length = 0;  ///< bytes
  std::string rkey;          ///< packed remote key, hex (opaque to everyone but the transport)
};

/// What a peer needs to reach this transport: sent once, in the worker's registration.
struct TransportInfo {
  std::string address;                ///< packed worker address, hex
  std::vector<RemoteRegion> regions;  ///< registered regions, in registration order
};

/// One contiguous piece of a transfer: @p length bytes at a local (region, offset) and a remote one.
struct TransferDescriptor {
  int local_region = 0;             ///< index into this side's registered regions
  std::uint64_t local_offset = 0;   ///< bytes from that region's base
  int remote_region = 0;            ///< index into the peer's TransportInfo::regions
  std::uint64_t remote_offset = 0;  ///< bytes from that region's base
  std::uint64_t length = 0;         ///< bytes
};

/// Limits on one transfer call.
struct TransferOptions {
  double timeout_seconds = 5;  ///< the whole call fails with an Error after this long
  /**
   * Pacing to an emulated link by the side that starts the transfer, bytes
   * per second; 0 = as fast as the real path. A piece is posted no earlier
   * than (bytes before it) / rate after the first, and the call returns no
   * earlier than bytes / rate: when the real path is faster than the
   * emulated link, the call takes bytes / rate.
   */
  double pace_bytes_per_second = 0;
};

/// A one-sided/two-sided byte mover between processes.
class Transport {
 public:
  virtual ~Transport() = default;

  /**
   * @brief Registers [@p base, @p base + @p length) for remote access (once, at start-up).
   * @return the region's index, used in descriptors and in local_info().regions.
   * @throws Error when the library refuses the region.
   */
  virtual int register_memory(void* base, std::size_t length) = 0;
  /// This side's address and registered regions (call after the last register_memory()).
  virtual TransportInfo local_info() = 0;
  /**
   * @brief Connects to a peer and unpacks its keys.
   * @return a peer handle for the calls below.
   * @throws Error when the address or a key cannot be decoded.
   */
  virtual int add_peer(const TransportInfo& peer) = 0;
  /// Drops a peer's endpoint and keys (it left, or was declared dead); unknown handles are ignored.
  virtual void remove_peer(int peer) = 0;

  /**
   * @brief WRITE: copies each descriptor's local bytes into the peer's memory
   *        and returns once they are there (remote completion, a flush).
   * @throws Error on a library error or when @p options.timeout_seconds passes; then nothing is pending.
   */
  virtual void write(int peer, std::span<const TransferDescriptor> descriptors, const TransferOptions& options) = 0;
  /// READ: copies each descriptor's remote bytes into local memory. @throws Error as write().
  virtual void read(int peer, std::span<const TransferDescriptor> descriptors, const TransferOptions& options) = 0;
  /**
   * @brief SEND: one tagged message per descriptor (tag @p tag + index) from local memory.
   *        It completes only once the peer posted the matching recv() (rendezvous) or the data was buffered.
   * @throws Error as write().
   */
  virtual void send(int peer, std::uint64_t tag, std::span<const TransferDescriptor> descriptors,
                    const TransferOptions& options) = 0;
  /// The receiving half of send(): one receive per descriptor into local memory. @throws Error as write().
  virtual void recv(std::uint64_t tag, std::span<const TransferDescriptor> descriptors,
                    const TransferOptions& options) = 0;
  /**
   * @brief Advances the library's pending work without blocking. The target
   *        of a one-sided operation calls it while it waits on something else:
   *        over TCP, UCX emulates put/get with messages the target must serve.
   */
  virtual void progress() = 0;
};

}  // namespace servelab::disagg
