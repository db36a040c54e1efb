// SPDX-License-Identifier: MIT
/**
 * @file client.h
 * @brief A client of the router: submits requests at their arrival times and
 *        collects each one's tokens, timestamps and transfer accounting.
 */
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "disagg/control.h"
#include "sched/request.h"

namespace servelab::disagg {

/// One request to send.
struct ClientRequest {
  std::vector<std::int32_t> prompt;  ///< token ids
  int max_tokens = 1;                ///< output tokens wanted
  double arrival = 0;                ///< seconds after the client starts
  RequestSampling sampling{};        ///< sampling settings and stop tokens (greedy, none by default)
};

/// What came back for one request.
struct ClientResult {
  std::vector<std::int32_t> tokens;  ///< output tokens, the prefill worker's first one included
  std::string error;                 ///< the reason the request failed; empty when it finished
  Message accounting;                ///< the transfer's accounting (bytes, descriptors, ms, checksums)
  RequestTimes times;                ///< client-clock seconds: arrival, each token, finish
};

/**
 * @brief Submits @p requests to the router at @p endpoint and waits for all of them; each message
 *        carries @p key, the cluster key, when it is not empty (a keyed router refuses messages without).
 * @return one result per request, in order.
 * @throws Error when not all requests ended within @p timeout seconds (their ids are named).
 */
std::vector<ClientResult> run_client(const std::string& endpoint, std::span<const ClientRequest> requests,
                                     double timeout, const std::string& key = "");

/**
 * @brief Waits until the router at @p endpoint has at least @p prefill
 *        workers that can prefill and @p decode that can decode (a worker of
 *        role both counts for each), so that timing starts on a whole fleet.
 *        With both counts above 0, only workers linked to a partner count
 *        (each has added the other's transport and said `peer_added`).
 *        @p key is the cluster key, as for run_client().
 * @throws Error naming the endpoint and the counts when @p timeout seconds pass first.
 */
void wait_for_workers(const std::string& endpoint, int prefill, int decode, double timeout,
                      const std::string& key = "");

/// Asks the router at @p endpoint to tell its workers to exit, and to exit (@p key: the cluster key, if it has one).
void shutdown_router(const std::string& endpoint, const std::string& key = "");

}  // namespace servelab::disagg
