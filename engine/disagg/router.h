// SPDX-License-Identifier: MIT
/**
 * @file router.h
 * @brief `servelab router`: the control plane's hub. Workers register with it,
 *        clients submit to it, and it walks each request through
 *        decode ALLOC → prefill → KV_READY → decode tokens.
 * @verbatim
 *  client ─submit─► router ─alloc─► decode ─allocated{blocks}─► router ─prefill{dst blocks}─► prefill
 *                     ▲                                                                        │ KV over UCX
 *                     └──── token / finished ◄── decode ◄── kv_ready{first token} ◄── router ◄─┘
 * @endverbatim
 * The router never touches KV bytes. It relays each worker's registration
 * (transport keys, KV layout, model hash) to the workers of the other role,
 * sends heartbeats, evicts a worker that falls silent (failing its requests
 * and telling the other side to free their blocks), and keeps a request that
 * finds the decode worker full waiting until blocks free up or
 * request_timeout passes, when the client is told why. A worker of role
 * `both` counts as either; a request whose decode blocks it holds is
 * prefilled by it too (colocated under the same router: no KV moves).
 * With several workers of a role (xPyD), each role takes turns round robin,
 * and a request's accounting names the prefill and decode workers that
 * served it; a client's `status` message is answered with the registered
 * workers by role, and those linked (wait_for_workers() in client.h).
 *
 * Linking: the router relays each registration to the workers of the other
 * role (`peer`); each adds the transport and answers `peer_added` (or
 * `peer_refused`, with UCX's reason). Only a pair that has added each other
 * is given requests; a request arriving before any pair has linked waits,
 * so a slow handshake delays a first request rather than failing it on the
 * decode worker's --kv-timeout.
 *
 * Trusting nobody: every frame is parsed against control.h's schema for its
 * sender (a registered identity is a worker; any other peer a client, which
 * may only submit, abort, ask status and, keyed, shut down), and a worker's
 * reply is taken only from the worker the request was given to, in the stage
 * where that reply is due (an `allocated` or `full` only from its decode
 * worker while it allocates, a `kv_ready` only from its prefill worker while
 * it prefills). A reply about a request that has ended is taken (and
 * ignored) only from a worker that served it, and one about a request that
 * never was from no one. Anything else is dropped and counted
 * (malformed_messages, in the status answer and the exit line); a client
 * also hears why. A worker that cannot use a peer's transport address or keys
 * (UCX refuses to unpack them: ucx_transport.h) says so (`peer_refused`): the
 * two are never paired, and a worker that every worker of the other role
 * has refused is itself refused, with the reason, and evicted. With a
 * cluster key (--cluster-key-file) every message must carry it as "key", so
 * a peer without it can neither register, shut the router down nor submit;
 * without one the router trusts its network, as before, and says so. A
 * registration whose KV layout (block size, dtype, layers, kv_dim), model
 * hash or UCX transports (UCX_TLS) differ from the registered workers' is
 * refused with both settings named, before any request can fail on it.
 * Liveness: a worker's heartbeats come from a thread of their own (a
 * separate socket naming the worker's id and the session the registration
 * handed it), so a long forward pass does not look like a dead worker. Every
 * dispatched request has a deadline: no word about it from its workers for
 * request_timeout fails it, and the client hears why.
 * @see labs/07_disaggregation/README.md
 */
#pragma once

#include <string>

namespace servelab::disagg {

/// Router settings (`servelab router` flags).
struct RouterConfig {
  std::string endpoint = "tcp://127.0.0.1:0";  ///< --control: where to bind; port 0 = an ephemeral one
  std::string endpoint_file;         ///< --endpoint-file: write the bound endpoint here (for workers and clients)
  double heartbeat_interval = 0.25;  ///< seconds between heartbeats to workers
  double worker_timeout = 2;         ///< --worker-timeout: a worker silent this long is evicted
  double request_timeout = 10;  ///< --request-timeout: longest a request waits for blocks, or for word from its workers
  std::string cluster_key;      ///< --cluster-key-file's key (read_cluster_key()); empty = no authentication
};

/**
 * @brief Binds, prints the endpoint on stdout, and serves until a client
 *        sends shutdown or SIGINT/SIGTERM arrives; then tells the workers to exit.
 * @throws Error when the endpoint cannot be bound or the endpoint file written.
 */
void run_router(const RouterConfig& config);

}  // namespace servelab::disagg
