// SPDX-License-Identifier: MIT
#include "disagg/control.h"

#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "core/json.h"

namespace servelab::disagg {

namespace {

void check_typed(const Message& m) {
  check(m.is_object() && m.contains("type") && m["type"].is_string(),
        "control message: expected a JSON object with a string \"type\", got ", json_brief(m));
}

Message parse_message(std::string_view frame) {
  Message m = parse_json(frame, "control message");
  check_typed(m);
  return m;
}

// What a schema field holds; every integer kind is range-checked.
enum class Kind {
  REQ,      // a router request id: an integer >= 0
  ID,       // a token, block, worker or client request id: an integer in [0, 2^31)
  COUNT,    // an integer in [1, 2^31)
  STRING,   // a string
  IDS,      // a list of IDs
  PROMPT,   // a non-empty list of IDs
  OBJECT,   // a JSON object (checked further by whoever reads it)
  SECONDS,  // a duration in (0, 3600]
};

struct Field {
  const char* key;
  Kind kind;
  bool required = true;
};

constexpr unsigned bit(Sender s) { return 1u << static_cast<unsigned>(s); }
constexpr unsigned kClient = bit(Sender::CLIENT), kWorker = bit(Sender::WORKER), kRouter = bit(Sender::ROUTER);

struct Schema {
  const char* type;
  unsigned senders;           // bits of the Senders that may send it
  std::vector<Field> fields;  // owned: an initializer_list's array would not outlive the table's initialisation
};

// Fields several messages carry. A worker describes itself (role, model, KV layout, transport) when it
// registers, and the router passes the same description on to its peers.
constexpr Field kSampling{"sampling", Kind::OBJECT, false}, kStops{"stop_token_ids", Kind::IDS, false};
constexpr Field kAccounting{"accounting", Kind::OBJECT, false};
constexpr Field kReq{"req", Kind::REQ}, kWorkerId{"worker_id", Kind::ID}, kReason{"reason", Kind::STRING};
constexpr Field kPrompt{"prompt", Kind::PROMPT}, kMaxTokens{"max_tokens", Kind::COUNT};
constexpr Field kSrcBlocks{"src_blocks", Kind::IDS}, kFirstToken{"first_token", Kind::ID};
constexpr Field kPrefillWorker{"prefill_worker", Kind::ID}, kSession{"session", Kind::STRING};
constexpr Field kRole{"role", Kind::STRING}, kModelHash{"model_hash", Kind::STRING};
constexpr Field kKvLayout{"kv_layout", Kind::OBJECT}, kTransport{"transport", Kind::OBJECT};

// The whole protocol: one row per (type, direction). A type with different fields in each direction
// (kv_ready relayed to decode names its prefill worker) has one row per direction.
const std::array kSchemas{
    // A client's: the router answers each with tokens, finished, failed or status.
    Schema{"submit", kClient, {{"client_req", Kind::ID}, kPrompt, kMaxTokens, kSampling, kStops}},
    Schema{"abort", kClient, {{"client_req", Kind::ID}}},
    Schema{"status", kClient, {}},
    Schema{"shutdown", kClient | kRouter, {}},
    // A worker's, to the router: its registration, liveness, and its replies about its requests.
    Schema{"register", kWorker, {kRole, kTransport, kKvLayout, kModelHash, {"ucx_tls", Kind::STRING}}},
    Schema{"heartbeat", kWorker, {kWorkerId, kSession}},
    Schema{"allocated", kWorker, {kReq, {"blocks", Kind::IDS}}},
    Schema{"full", kWorker, {kReq, kReason}},
    Schema{"kv_sending", kWorker, {kReq, kSrcBlocks}},
    Schema{"kv_ready", kWorker, {kReq, kFirstToken, kSrcBlocks, kAccounting}},
    Schema{"read_done", kWorker | kRouter, {kReq}},
    Schema{"token", kWorker, {kReq, {"token", Kind::ID}}},
    Schema{"finished", kWorker, {kReq, kAccounting}},
    Schema{"failed", kWorker, {kReq, kReason}},
    Schema{"peer_refused", kWorker, {kWorkerId, kReason}},
    Schema{"peer_added", kWorker, {kWorkerId}},
    // The router's, to a worker.
    Schema{"heartbeat", kRouter, {}},
    Schema{"registered", kRouter, {kWorkerId, kSession, {"heartbeat_interval", Kind::SECONDS}}},
    Schema{"refused", kRouter, {kReason}},
    Schema{"peer", kRouter, {kWorkerId, kRole, kModelHash, kKvLayout, kTransport}},
    Schema{"peer_gone", kRouter, {kWorkerId}},
    Schema{"alloc", kRouter, {kReq, kPrompt, kMaxTokens, kSampling, kStops}},
    Schema{
        "prefill", kRouter, {kReq, kPrompt, {"dst_blocks", Kind::IDS}, {"decode_worker", Kind::ID}, kSampling, kStops}},
    Schema{"kv_sending", kRouter, {kReq, kSrcBlocks, kPrefillWorker}},
    Schema{"kv_ready", kRouter, {kReq, kFirstToken, kSrcBlocks, kPrefillWorker, kAccounting}},
    Schema{"abort", kRouter, {kReq}},
};

const char* sender_name(Sender s) {
  switch (s) {
    case Sender::CLIENT: return "a client";
    case Sender::WORKER: return "a worker";
    case Sender::ROUTER: return "the router";
  }
  return "?";
}

bool wait_readable(zmq::socket_t& socket, int timeout_ms) {
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  try {
    return zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) > 0;
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return false;  // a signal (SIGTERM to the router): the caller's loop decides
    throw;
  }
}

std::string where(const Message& m, const char* key) {
  return std::string("control message '") +
         (m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "?") + "': field '" + key + "'";
}

void check_field(const Message& m, const Field& f) {
  constexpr std::int64_t kId = std::numeric_limits<std::int32_t>::max();
  if (!m.contains(f.key)) {
    check(!f.required, where(m, f.key), " is missing");
    return;
  }
  switch (f.kind) {
    case Kind::REQ: (void)field_int(m, f.key, 0, std::numeric_limits<std::int64_t>::max()); break;
    case Kind::ID: (void)field_int(m, f.key, 0, kId); break;
    case Kind::COUNT: (void)field_int(m, f.key, 1, kId); break;
    case Kind::STRING: (void)field_string(m, f.key); break;
    case Kind::IDS: (void)field_ids(m, f.key, kId); break;
    case Kind::PROMPT:
      check(!field_ids(m, f.key, kId).empty(), where(m, f.key), " must not be empty (a prompt of at least one token)");
      break;
    case Kind::OBJECT: check(m[f.key].is_object(), where(m, f.key), " must be an object"); break;
    case Kind::SECONDS: check(field_number(m, f.key, 0, 3600) > 0, where(m, f.key), " must be > 0"); break;
  }
}

}  // namespace

void check_schema(const Message& m, Sender sender) {
  check_typed(m);
  const std::string& type = m["type"].get_ref<const std::string&>();
  bool known = false;
  for (const Schema& s : kSchemas) {
    if (type != s.type) continue;
    known = true;
    if (!(s.senders & bit(sender))) continue;
    for (const Field& f : s.fields) check_field(m, f);
    return;
  }
  check(!known, "control message '", type, "' may not come from ", sender_name(sender));
  fail("control message: unknown type ", json_brief(m["type"]));
}

Message parse_control(std::string_view frame, Sender sender) {
  Message m = parse_json(frame, "control message");
  check_schema(m, sender);
  return m;
}

std::string read_cluster_key(const std::string& path, const std::string& flag) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(flag, " ", path, ": cannot read it (", std::strerror(errno), ")");
  // A FIFO or a device would block or never end: a key is a small regular file.
  check(S_ISREG(st.st_mode), flag, " ", path, ": expected a regular file holding the cluster key");
  check(st.st_size <= 4096, flag, " ", path, ": ", st.st_size, " bytes; a cluster key file holds at most 4096");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), flag, " ", path, ": cannot read it");
  std::string key(std::istreambuf_iterator<char>(in), {});
  const auto first = key.find_first_not_of(" \t\r\n"), last = key.find_last_not_of(" \t\r\n");
  key = first == std::string::npos ? "" : key.substr(first, last - first + 1);
  check(key.size() >= 16, flag, " ", path, ": the key has ", key.size(),
        " characters; expected at least 16 (e.g. `openssl rand -hex 32 > FILE`)");
  return key;
}

bool same_key(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

zmq::socket_t connect_dealer(zmq::context_t& context, const std::string& endpoint) {
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.connect(endpoint);
  return socket;
}

void send_message(zmq::socket_t& dealer, const Message& message) {
  dealer.send(zmq::buffer(message.dump()), zmq::send_flags::none);
}

void send_message(zmq::socket_t& router, const std::string& identity, const Message& message) {
  router.send(zmq::buffer(identity), zmq::send_flags::sndmore);
  router.send(zmq::buffer(message.dump()), zmq::send_flags::none);
}

std::optional<Message> receive_message(zmq::socket_t& dealer, int timeout_ms) {
  if (!wait_readable(dealer, timeout_ms)) return std::nullopt;
  zmq::message_t frame;
  if (!dealer.recv(frame, zmq::recv_flags::dontwait)) return std::nullopt;
  return parse_message(frame.to_string_view());
}

std::optional<std::pair<std::string, std::string>> receive_routed(zmq::socket_t& router, int timeout_ms) {
  if (!wait_readable(router, timeout_ms)) return std::nullopt;
  zmq::message_t identity, frame;
  if (!router.recv(identity, zmq::recv_flags::dontwait)) return std::nullopt;
  std::string payload;
  bool more = identity.more();
  if (more && router.recv(frame, zmq::recv_flags::none)) {
    payload = frame.to_string();
    more = frame.more();
  }
  while (more) {  // a peer that sent more frames than one: keep the first, drain the rest
    zmq::message_t extra;
    if (!router.recv(extra, zmq::recv_flags::none)) break;
    more = extra.more();
  }
  return std::pair{identity.to_string(), std::move(payload)};
}

std::int64_t field_int(const Message& m, const char* key, std::int64_t lo, std::int64_t hi) {
  check(m.contains(key), where(m, key), " is missing");
  return json_int<std::int64_t>(m[key], lo, hi, where(m, key));
}

std::string field_string(const Message& m, const char* key) {
  check(m.contains(key) && m[key].is_string(), where(m, key), " must be a string");
  return m[key].get<std::string>();
}

std::vector<std::int32_t> field_ids(const Message& m, const char* key, std::int64_t hi) {
  check(m.contains(key) && m[key].is_array(), where(m, key), " must be a list of integers");
  std::vector<std::int32_t> ids;
  for (const nlohmann::json& v : m[key])
    ids.push_back(json_int<std::int32_t>(
        v, 0, checked_int<std::int32_t>(hi, 0, std::numeric_limits<std::int32_t>::max(), where(m, key)),
        where(m, key)));
  return ids;
}

double field_number(const Message& m, const char* key, double lo, double hi) {
  check(m.contains(key) && m[key].is_number(), where(m, key), " must be a number");
  const double v = m[key].get<double>();
  check(std::isfinite(v) && v >= lo && v <= hi, where(m, key), " must be in [", lo, ", ", hi, "], got ",
        json_brief(m[key]));
  return v;
}

void put_sampling(Message& m, const RequestSampling& s) {
  m["sampling"] = {{"temperature", s.params.temperature},
                   {"top_k", s.params.top_k},
                   {"top_p", s.params.top_p},
                   {"seed", s.params.seed}};
  m["stop_token_ids"] = s.stop_token_ids;
}

RequestSampling sampling_from(const Message& m, std::int64_t vocab_size) {
  RequestSampling out;
  if (m.contains("sampling")) {
    const Message& j = m["sampling"];
    check(j.is_object(), where(m, "sampling"), " must be an object");
    Message named = j;
    named["type"] = m.value("type", std::string("?")) + ".sampling";  // errors name both levels
    out.params.temperature = static_cast<float>(field_number(named, "temperature", 0, 1e6));
    out.params.top_k = static_cast<int>(field_int(named, "top_k", 0, std::numeric_limits<std::int32_t>::max()));
    out.params.top_p = static_cast<float>(field_number(named, "top_p", 0, 1));
    out.params.seed = static_cast<std::uint64_t>(field_int(named, "seed", 0, std::numeric_limits<std::int64_t>::max()));
    out.params.validate();
  }
  if (m.contains("stop_token_ids")) out.stop_token_ids = field_ids(m, "stop_token_ids", vocab_size - 1);
  return out;
}

nlohmann::json to_json(const TransportInfo& info) {
  nlohmann::json regions = nlohmann::json::array();
  for (const RemoteRegion& r : info.regions)
    regions.push_back({{"base", r.base}, {"length", r.length}, {"rkey", r.rkey}});
  return {{"address", info.address}, {"regions", regions}};
}

TransportInfo transport_info_from_json(const nlohmann::json& j) {
  check(j.is_object(), "registration: 'transport' must be an object");
  TransportInfo info;
  info.address = field_string(j, "address");
  check(j.contains("regions") && j["regions"].is_array(), "registration: 'transport.regions' must be a list");
  for (const nlohmann::json& r : j["regions"]) {
    check(r.is_object(), "registration: a transport region must be an object");
    info.regions.push_back(
        {json_int<std::uint64_t>(r.value("base", nlohmann::json()), 0, ~std::uint64_t{0}, "region base"),
         json_int<std::uint64_t>(r.value("length", nlohmann::json()), 1, ~std::uint64_t{0}, "region length"),
         field_string(r, "rkey")});
  }
  return info;
}

nlohmann::json to_json(const KVLayout& l) {
  return {{"num_layers", l.num_layers},
          {"num_blocks", l.num_blocks},
          {"block_size", l.block_size},
          {"kv_dim", l.kv_dim},
          {"dtype_bytes", l.dtype_bytes}};
}

KVLayout kv_layout_from_json(const nlohmann::json& j) {
  check(j.is_object(), "registration: 'kv_layout' must be an object");
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  return {.num_layers = static_cast<int>(field_int(j, "num_layers", 1, kMax)),
          .num_blocks = static_cast<int>(field_int(j, "num_blocks", 1, kMax)),
          .block_size = static_cast<int>(field_int(j, "block_size", 1, kMax)),
          .kv_dim = static_cast<int>(field_int(j, "kv_dim", 1, kMax)),
          .dtype_bytes = static_cast<int>(field_int(j, "dtype_bytes", 1, 8))};
}

}  // namespace servelab::disagg
