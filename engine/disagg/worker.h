/**
 * @file worker.h
 * @brief `servelab worker --role prefill|decode|both`: a model, a KV block pool
 *        registered with the transport once, and a loop over the router's messages.
 *
 * The prefill worker runs a request's prompt in one step, moves the KV into
 * the blocks the decode worker set aside (or lets it read them, or sends
 * them), and reports KV_READY with the first token and the transfer's
 * accounting. The decode worker reserves blocks for prompt + max_tokens at
 * ALLOC (so a running request never runs out), takes the KV, checks its
 * checksum against the prefill side's, and decodes every running request in
 * one batched step per loop, streaming tokens back. A worker of both roles
 * does either for other workers and, for a request it decodes, runs the
 * prompt straight into the blocks it reserved: colocated serving under the
 * same router, with no KV moved (accounting mode "local", 0 bytes).
 *
 * Failure rules (every wait has a deadline):
 * - decode frees a request's blocks when no KV arrives within kv_timeout, or
 *   when the router aborts it;
 * - in READ mode prefill frees its blocks at READ_DONE or after kv_timeout,
 *   and starts no other prompt until then: decode's get completes only while
 *   the prefill side progresses UCX (over TCP, and over shared memory when UCX
 *   emulates the get with messages), which it does not during a forward pass;
 * - a worker that hears nothing from the router for router_timeout exits
 *   (cleanly, status 0: the router is gone, not the worker broken).
 * @see labs/07_disaggregation/README.md
 */
#pragma once

#include <cstdint>
#include <string>

#include "disagg/transport.h"

namespace servelab::disagg {

/// Worker settings (`servelab worker` flags).
struct WorkerConfig {
  std::string role;                  ///< --role: prefill, decode or both
  std::string router;                ///< --router: the router's endpoint (tcp://host:port)
  std::string router_file;           ///< --router-file: read the endpoint from this file instead (waits for it)
  std::string preset = "tiny";       ///< --preset: model shape with synthetic weights
  std::string model_dir;             ///< --model: Hugging Face folder instead of a preset
  std::uint64_t weights_seed = 0;    ///< --weights-seed
  int threads = 1;                   ///< --threads (a worker per core is the point)
  bool deterministic = false;        ///< --deterministic: batch-invariant reductions
  int num_blocks = 256;              ///< --num-blocks: KV blocks in this worker's pool
  int block_size = 16;               ///< --block-size: tokens per block (must match the peer's)
  TransferMode mode = TransferMode::WRITE;  ///< --kv-transfer
  bool layerwise = false;            ///< --layerwise: stream each layer's KV during the forward pass (WRITE only)
  std::string link = "none";         ///< --link: emulated interconnect (link.h)
  std::string link_model = "llama-3-8b";  ///< --link-model: the large model whose KV the pacing stands in for
  double kv_timeout = 5;             ///< --kv-timeout: longest wait for a request's KV (either side), seconds
  double router_timeout = 3;         ///< --router-timeout: exit after this long without a word from the router
  double heartbeat_interval = 0.25;  ///< seconds between heartbeats
};

/// How a worker's run ended.
struct WorkerSummary {
  long requests_served = 0;  ///< requests it prefilled or decoded to the end
  int blocks_in_use = 0;     ///< KV blocks still held by requests when it stopped (0 after a clean shutdown)
  int num_blocks = 0;        ///< blocks in its pool
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

/// A short hex fingerprint of the model a worker serves: both sides must agree (vLLM's compatibility hash).
std::string model_hash(const std::string& preset, const std::string& model_dir, std::uint64_t weights_seed);

}  // namespace servelab::disagg
