// SPDX-License-Identifier: MIT
/**
 * @file worker_context.h
 * @brief What a worker's prefill and decode roles share: the one engine, the
 *        transport, the router socket and the peers learnt from the router.
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include <zmq.hpp>

#include "core/error.h"
#include "disagg/control.h"
#include "disagg/transport.h"
#include "disagg/worker.h"
#include "serve/engine.h"

namespace servelab::disagg {

/// A worker of the other role, as the router relayed its registration.
struct Peer {
  int handle = 0;   ///< Transport peer handle
  KVLayout layout;  ///< its KV cache's layout (block ids in messages index its cache)
};

/// The state both roles of a worker use; owned by the worker's loop, which outlives the roles.
struct WorkerContext {
  const WorkerConfig& config;   ///< the flags
  Engine& engine;               ///< the one engine: every request of either role is one of its requests
  Transport& transport;         ///< the KV data plane, with the engine's KV cache registered
  zmq::socket_t& socket;        ///< the DEALER connected to the router
  KVLayout layout{};            ///< this worker's KV layout
  double pace = 0;              ///< link emulation: bytes per second of each transfer; 0 = unpaced
  std::map<int, Peer> peers{};  ///< by router-given worker id
  int vocab_size = 0;           ///< the model's: token ids in messages must be below it
  int self_id = -1;             ///< the router's id for this worker
  long served = 0;              ///< requests prefilled or decoded to the end
  long malformed = 0;           ///< messages dropped (WorkerSummary::malformed_messages)

  /// Sends @p message to the router, with the cluster key when there is one.
  void send(Message message) {
    if (!config.cluster_key.empty()) message["key"] = config.cluster_key;
    send_message(socket, message);
  }
  /// Counts a message dropped because @p why, and logs it (the first few, then every thousandth).
  void dropped(const std::string& why);
  /// Tells the router that request @p req failed here and why.
  void report_failure(std::int64_t req, const std::string& reason) {
    send({{"type", "failed"}, {"req", req}, {"reason", reason}});
  }
  /// The peer whose router id is @p worker_id. @throws Error when its registration has not arrived.
  const Peer& peer(int worker_id) const;
  /// Each transfer's deadline and pacing.
  TransferOptions transfer_options() const {
    return {.timeout_seconds = config.kv_timeout, .pace_bytes_per_second = pace};
  }
  /// The KV blocks of engine request @p request_id, in table order.
  std::vector<std::int32_t> blocks_of(int request_id) const;
  /// kv_checksum() of the first @p num_tokens tokens of engine request @p request_id, as 16 hex digits.
  std::string checksum(int request_id, int num_tokens) const;
};

/// Field @p key of @p m as a router request id.
std::int64_t field_req(const Message& m, const char* key = "req");
/// Field @p key of @p m as a router worker id.
int field_worker(const Message& m, const char* key);

/// The requests one role of a worker holds, by engine request id, each with the role's record of it
/// (a @p Job with a `req` member: the router's id for the request).
template <class Job>
class RoleJobs {
 public:
  /// True when engine request @p request_id is one of this role's.
  bool owns(int request_id) const { return jobs_.count(request_id) > 0; }

 protected:
  /// The job of router request @p req, or jobs_.end().
  typename std::map<int, Job>::iterator find(std::int64_t req) {
    return std::find_if(jobs_.begin(), jobs_.end(), [&](const auto& j) { return j.second.req == req; });
  }
  /**
   * @brief Takes on the request router message @p m names (field "req") with @p body(req), unless it is one
   *        of this role's already: then the message is dropped, logged as "<what> for request <req>, <already>".
   *
   * An Error from @p body fails the request at the router, with its message as the reason.
   */
  template <class Body>
  void take_on(WorkerContext& c, const Message& m, const char* what, const char* already, Body&& body) {
    const std::int64_t req = field_req(m);
    if (find(req) != jobs_.end())
      return c.dropped(std::string(what) + " for request " + std::to_string(req) + ", " + already);
    try {
      body(req);
    } catch (const Error& e) {
      c.report_failure(req, e.what());
    }
  }
  std::map<int, Job> jobs_;  ///< by engine request id
};

/// SEND mode's tag of request @p req's messages: the request id in the high half, the piece index in the low.
inline std::uint64_t kv_send_tag(std::int64_t req) { return static_cast<std::uint64_t>(req + 1) << 32; }

}  // namespace servelab::disagg
