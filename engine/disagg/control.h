// SPDX-License-Identifier: MIT
/**
 * @file control.h
 * @brief The control plane's wire format: JSON messages over ZeroMQ
 *        (a ROUTER socket in the router, a DEALER in each worker and client),
 *        as vLLM's, SGLang's and TensorRT-LLM's disaggregated modes do.
 *
 * Every message is one JSON object with a "type". Bytes of KV never travel
 * here; only block ids, tokens and the one-time transport keys do. Incoming
 * messages are parsed with the depth limit of core/json.h and checked against
 * one schema (check_schema(): the types each kind of sender may send, and
 * every required field's type and range), so a malformed or misdirected
 * message is an Error naming the type and field, which the receiver answers
 * or drops and counts, never a crash. Who sent a message is the receiver's
 * knowledge, not the message's claim: a worker's DEALER hears only the router
 * it connected to, and the router knows its workers by ZeroMQ identity and
 * the cluster key (router.h).
 */
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "disagg/kv_transfer_plan.h"
#include "disagg/transport.h"
#include "model/sampler.h"

namespace servelab::disagg {

/// One control message: a JSON object with a string "type".
using Message = nlohmann::json;

/// Who sends a message, as its receiver has established it.
enum class Sender {
  CLIENT,  ///< any peer of the router that has not registered: may submit, abort, ask status (and shut down, keyed)
  WORKER,  ///< a peer of the router registering, or registered, as a worker: its own replies
  ROUTER,  ///< the router, as its workers hear it: the only sender of alloc, prefill, shutdown, peers
};

/**
 * @brief Checks @p m against the control plane's schema for messages from @p sender:
 *        a JSON object whose string "type" that sender may send, with each of
 *        that type's required fields present and of its type and range
 *        (request ids >= 0, token and block ids in int32, non-empty prompts).
 *        Fields the schema does not name are left alone.
 * @throws Error naming the type and the field otherwise.
 */
void check_schema(const Message& m, Sender sender);

/**
 * @brief One frame of bytes from @p sender as a control message: parsed (depth-limited) and check_schema()'d.
 * @throws Error when the bytes are not JSON or the message fails the schema.
 */
Message parse_control(std::string_view frame, Sender sender);

/**
 * @brief The cluster key in file @p path (`--cluster-key-file`): its contents without surrounding whitespace.
 * @throws Error naming @p flag and the file when it cannot be read, is not a regular file, is over 4 KiB
 *         or holds fewer than 16 characters.
 */
std::string read_cluster_key(const std::string& path, const std::string& flag);

/// True when @p a equals @p b, in a time that does not depend on where they first differ.
bool same_key(const std::string& a, const std::string& b);

/// A DEALER connected to @p endpoint that drops unsent messages at close (no hang at exit).
zmq::socket_t connect_dealer(zmq::context_t& context, const std::string& endpoint);
/// Sends @p message on a DEALER socket.
void send_message(zmq::socket_t& dealer, const Message& message);
/// Sends @p message to the peer @p identity of a ROUTER socket.
void send_message(zmq::socket_t& router, const std::string& identity, const Message& message);
/**
 * @brief The next message on a DEALER socket, or nothing after @p timeout_ms.
 * @throws Error when the message is not a JSON object with a string "type".
 */
std::optional<Message> receive_message(zmq::socket_t& dealer, int timeout_ms);
/**
 * @brief The next (sender identity, first payload frame's bytes) on a ROUTER socket, or nothing after
 *        @p timeout_ms; further frames of the same message are drained. A message without a payload
 *        frame comes back with an empty payload (which parse_control() refuses). Never throws on what a
 *        peer sent: the caller parses, inside its own error handling.
 */
std::optional<std::pair<std::string, std::string>> receive_routed(zmq::socket_t& router, int timeout_ms);

/// Field @p key of @p m as an integer in [@p lo, @p hi]. @throws Error naming the message type and field.
std::int64_t field_int(const Message& m, const char* key, std::int64_t lo, std::int64_t hi);
/// Field @p key of @p m as a string. @throws Error naming the field.
std::string field_string(const Message& m, const char* key);
/// Field @p key of @p m as a list of ids in [0, @p hi]. @throws Error naming the field.
std::vector<std::int32_t> field_ids(const Message& m, const char* key, std::int64_t hi);

/// Field @p key of @p m as a finite number in [@p lo, @p hi]. @throws Error naming the message type and field.
double field_number(const Message& m, const char* key, double lo, double hi);

/// A request's sampling settings and stop tokens, as they travel from the client to both workers.
struct RequestSampling {
  SamplingParams params{};                     ///< temperature, top_k, top_p, seed (below 2^63 on the wire)
  std::vector<std::int32_t> stop_token_ids{};  ///< the request finishes after emitting one of these
};
/// Adds @p sampling to @p m as fields "sampling" and "stop_token_ids".
void put_sampling(Message& m, const RequestSampling& sampling);
/**
 * @brief The fields put_sampling() wrote; greedy with no stop tokens when they are absent.
 * @param vocab_size stop token ids must be below it.
 * @throws Error naming the field when one is malformed or out of range.
 */
RequestSampling sampling_from(const Message& m, std::int64_t vocab_size);

/// @p info as JSON (addresses and keys as hex).
nlohmann::json to_json(const TransportInfo& info);
/// The inverse of to_json(). @throws Error naming the field when one is missing or malformed.
TransportInfo transport_info_from_json(const nlohmann::json& j);
/// @p layout as JSON.
nlohmann::json to_json(const KVLayout& layout);
/// The inverse. @throws Error naming the field.
KVLayout kv_layout_from_json(const nlohmann::json& j);

}  // namespace servelab::disagg
