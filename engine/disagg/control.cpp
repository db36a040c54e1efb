// SPDX-License-Identifier: MIT
#include "disagg/control.h"

#include <cerrno>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/json.h"

namespace servelab::disagg {

namespace {

Message parse_message(const zmq::message_t& frame) {
  Message m = parse_json(frame.to_string_view(), "control message");
  check(m.is_object() && m.contains("type") && m["type"].is_string(),
        "control message: expected a JSON object with a string \"type\", got ", json_brief(m));
  return m;
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

}  // namespace

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
  return parse_message(frame);
}

std::optional<std::pair<std::string, Message>> receive_routed(zmq::socket_t& router, int timeout_ms) {
  if (!wait_readable(router, timeout_ms)) return std::nullopt;
  zmq::message_t identity, frame;
  if (!router.recv(identity, zmq::recv_flags::dontwait)) return std::nullopt;
  check(identity.more() && router.recv(frame, zmq::recv_flags::none).has_value(), "control message: no payload frame");
  while (frame.more()) {  // a peer that sent more frames than one: keep the first, drain the rest
    zmq::message_t extra;
    (void)router.recv(extra, zmq::recv_flags::none);
    if (!extra.more()) break;
  }
  return std::pair{identity.to_string(), parse_message(frame)};
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
