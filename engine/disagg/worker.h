// SPDX-License-Identifier: MIT
/**
 * @file worker.h
 * @brief `servelab worker --role prefill|decode|both`: the one Engine of
 *        serve/engine.h, its KV cache registered with the transport once, and a
 *        loop over the router's messages.
 *
 * A worker is an engine plus a transport; it has no scheduler of its own.
 * The prefill role (prefill_role.h) queues each prompt as an engine request
 * of max_tokens = 1, so a step may prefill several prompts; the finished
 * request keeps its blocks (hold_finished_kv) until its KV has been moved
 * into the blocks the decode worker set aside, sent, or read. The decode
 * role (decode_role.h) queues each request at ALLOC as waiting for remote
 * KV with its prompt's blocks taken (Engine::add_remote_request), checks the
 * KV's checksum when it arrives, and from then on the engine schedules it
 * like any other: continuous batching under max_num_seqs and the token
 * budget, blocks taken as it grows, preemption by recompute (the decode
 * worker has the prompt) when they run out, stop tokens and sampling. A
 * worker of both roles does either for other workers and, for a request it
 * decodes, computes the prompt itself into the blocks it holds: colocated
 * serving under the same router, with no KV moved (accounting mode "local",
 * 0 bytes).
 *
 * Failure rules (every wait has a deadline):
 * - decode frees a request's blocks when no KV arrives within kv_timeout, or
 *   when the router aborts it;
 * - in READ mode prefill frees its blocks at READ_DONE or after kv_timeout,
 *   and runs no step until then: decode's get completes only while the
 *   prefill side progresses UCX (over TCP, and over shared memory when UCX
 *   emulates the get with messages), which it does not during a forward pass;
 * - a worker that hears nothing from the router for router_timeout exits
 *   (cleanly, status 0: the router is gone, not the worker broken); it warns
 *   at registration when router_timeout is under four of the router's
 *   heartbeats, the margin the router itself gives a worker;
 * - its heartbeats come from a thread of their own, on a socket of their own,
 *   so that a forward pass longer than the router's --worker-timeout does not
 *   get a busy worker evicted as a dead one.
 *
 * Nothing the router relays is trusted further than control.h's schema: a
 * message that fails it, or one about a request this worker does not hold in
 * the state the message needs (an `alloc` for a request it already holds,
 * KV for a request already decoding), is dropped and counted
 * (WorkerSummary::malformed_messages), and takes no block.
 * @see labs/07_disaggregation/README.md
 */
#pragma once

#include <cstdint>
#include <string>

#include "cli/model_flags.h"
#include "disagg/transport.h"

namespace servelab::disagg {

/// What a worker does for the router (`--role`).
enum class WorkerRole {
  PREFILL,  ///< computes prompts (max_tokens = 1) and moves their KV to the decode worker's blocks
  DECODE,   ///< takes a request's blocks at ALLOC, waits for its KV, then decodes it
  BOTH,     ///< either, and computes itself the prompts of the requests it decodes (colocated, no KV moved)
};

/// "prefill", "decode" or "both" (the wire's and the flag's names).
const char* to_string(WorkerRole role);
/// Parses to_string()'s names. @throws Error naming @p what and the accepted names otherwise.
WorkerRole parse_worker_role(const std::string& text, const std::string& what);

/// Worker settings (`servelab worker` flags).
struct WorkerConfig {
  WorkerRole role = WorkerRole::PREFILL;  ///< --role
  std::string router;                     ///< --router: the router's endpoint (tcp://host:port)
  std::string router_file;                ///< --router-file: read the endpoint from this file instead (waits for it)
  cli::ModelFlags model{.threads =
                            1};  ///< the model flags (cli/model_flags.h); one thread: a worker per core is the point
  int num_blocks = 256;          ///< --num-blocks: KV blocks in this worker's pool
  int block_size = 16;           ///< --block-size: tokens per block (must match the peer's)
  int max_num_seqs = 16;         ///< --max-num-seqs: most requests in one engine step
  int max_num_batched_tokens = 2048;    ///< --max-num-batched-tokens: most tokens in one step
  bool enable_chunked_prefill = false;  ///< --enable-chunked-prefill: a prompt may take several steps (lab 06's switch)
  TransferMode mode = TransferMode::WRITE;  ///< --kv-transfer
  bool layerwise = false;                 ///< --layerwise: stream each layer's KV during the forward pass (WRITE only)
  std::string link = "none";              ///< --link: emulated interconnect (link.h)
  std::string link_model = "llama-3-8b";  ///< --link-model: the large model whose KV the pacing stands in for
  double kv_timeout = 5;                  ///< --kv-timeout: longest wait for a request's KV (either side), seconds
  double router_timeout = 3;              ///< --router-timeout: exit after this long without a word from the router
  std::string cluster_key;                ///< --cluster-key-file's key, sent with every message; empty = none
};

/// How a worker's run ended.
struct WorkerSummary {
  long requests_served = 0;  ///< requests it prefilled or decoded to the end
  int blocks_in_use = 0;     ///< KV blocks still held by requests when it stopped (0 after a clean shutdown)
  int num_blocks = 0;        ///< blocks in its pool
  long malformed_messages = 0;  ///< messages dropped: malformed, or about a request not held in the state they need
};

/**
 * @brief Loads the model, registers with the router, serves until the router
 *        says shutdown or goes silent. Blocks still held at the end are freed
 *        and counted in the summary (`servelab worker` then exits with status 2).
 * @return what it served and what it held at the end.
 * @throws Error when a setting is bad, the model cannot be loaded, the router
 *         does not answer the registration in time, or refuses it.
 */
WorkerSummary run_worker(const WorkerConfig& config);

/// A short hex fingerprint of the model a worker serves (its config or preset and seed, and the weight
/// dtype): both sides must agree (vLLM's compatibility hash).
std::string model_hash(const cli::ModelFlags& model);

}  // namespace servelab::disagg
