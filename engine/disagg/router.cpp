// SPDX-License-Identifier: MIT
#include "disagg/router.h"

#include <algorithm>
#include <csignal>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <zmq.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/timer.h"
#include "disagg/control.h"

namespace servelab::disagg {

namespace {

volatile std::sig_atomic_t g_stop = 0;

struct Worker {
  int id = 0;
  std::string role;      // "prefill", "decode" or "both"
  Message registration;  // as sent (less the key), relayed to the other role
  double last_seen = 0;
  std::string session;  // handed over at registration; its heartbeat socket names it
};

// Where a request is, and so which worker's reply is due.
enum class Stage { QUEUED, ALLOCATING, PREFILLING, DECODING };

struct RoutedRequest {
  std::string client;  // identity of the submitting client
  std::int64_t client_req = 0;
  Message prompt;  // token ids, as submitted (checked by the workers' engines)
  std::int64_t max_tokens = 0;
  Message sampling = Message::object();  // "sampling" and "stop_token_ids" as submitted, for both workers
  std::string prefill{}, decode{};       // identities; empty until chosen
  double submitted = 0;
  Stage stage = Stage::QUEUED;
  double deadline = 0;  // dispatched: failed when no word about it comes from its workers by then
  Message accounting = Message::object();
};

// "type" of @p m when it is an object with a string one; "" otherwise.
std::string type_of(const Message& m) {
  return m.is_object() && m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
}

std::string new_session() {
  std::random_device device;
  std::ostringstream os;
  os << std::hex << device() << device() << device() << device();
  return os.str();
}

class Router {
 public:
  explicit Router(const RouterConfig& config) : config_(config), socket_(context_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    try {
      socket_.bind(config.endpoint);
    } catch (const zmq::error_t& e) {
      fail("--control ", config.endpoint, ": cannot bind (", e.what(), ")");
    }
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }

  void serve() {
    std::cout << endpoint_ << std::endl;
    if (config_.cluster_key.empty())
      std::cerr << "servelab router: no --cluster-key-file: any peer that reaches " << endpoint_
                << " may register as a worker or shut the router down\n";
    if (!config_.endpoint_file.empty()) {
      // Written then renamed, so a reader never sees half an endpoint.
      const std::string tmp = config_.endpoint_file + ".tmp";
      std::ofstream(tmp) << endpoint_ << "\n";
      std::error_code ec;
      std::filesystem::rename(tmp, config_.endpoint_file, ec);
      check(!ec, "--endpoint-file ", config_.endpoint_file, ": cannot write (", ec.message(), ")");
    }
    double next_beat = 0, next_retry = 0;
    while (!g_stop && !shutdown_) {
      // Everything that has arrived is read before anyone is judged silent: a router that was itself
      // descheduled for a while finds the heartbeats queued. Bounded, so that a storm of frames does not
      // keep the heartbeats and timeouts from running.
      for (int n = 0; n < 1000; ++n) {
        auto in = receive_routed(socket_, n == 0 ? 20 : 0);
        if (!in) break;
        on_frame(in->first, in->second);
      }
      const double now = now_seconds();
      if (now >= next_beat) {
        for (auto& [identity, w] : workers_) send_message(socket_, identity, {{"type", "heartbeat"}});
        evict_silent(now);
        expire_dispatched(now);
        next_beat = now + beat_interval();
      }
      if (now >= next_retry) {
        dispatch();
        next_retry = now + 0.05;
      }
    }
    for (auto& [identity, w] : workers_) send_message(socket_, identity, {{"type", "shutdown"}});
    std::cerr << "servelab router: stopped; " << malformed_ << " malformed or unauthorised messages dropped\n";
    // Let ZeroMQ hand the shutdowns over before the socket closes (linger is 0).
    const double until = now_seconds() + 0.2;
    while (now_seconds() < until) (void)receive_routed(socket_, 20);
  }

 private:
  std::string describe(const std::string& identity) const {
    const auto it = workers_.find(identity);
    return it == workers_.end() ? "a client" : it->second.role + " worker " + std::to_string(it->second.id);
  }

  // One frame from @p from: checked, authorised and handled; whatever it holds, never fatal.
  void on_frame(const std::string& from, const std::string& payload) {
    Sender sender = workers_.count(from) ? Sender::WORKER : Sender::CLIENT;
    Message m;
    try {
      m = parse_json(payload, "control message");
      // An unknown peer registering, or a worker's heartbeat socket, speaks as a worker.
      const std::string type = type_of(m);
      if (sender == Sender::CLIENT && (type == "register" || type == "heartbeat")) sender = Sender::WORKER;
      check_schema(m, sender);
      if (!config_.cluster_key.empty())
        check(m.contains("key") && m["key"].is_string() && same_key(m["key"].get<std::string>(), config_.cluster_key),
              "'", type, "' without this router's cluster key (--cluster-key-file)");
      handle(from, sender, m);
    } catch (const std::exception& e) {
      drop(from, sender, m, e.what());
    }
  }

  // Counts a message refused, logs it (the first few, then every thousandth: a storm must not flood the
  // log), and tells a client why; a registering peer hears "refused", so that it exits saying why.
  void drop(const std::string& from, Sender sender, const Message& m, const std::string& reason) {
    ++malformed_;
    if (malformed_ <= 20 || malformed_ % 1000 == 0)
      std::cerr << "servelab router: dropped a message from " << describe(from) << " (" << malformed_
                << " so far): " << reason << "\n";
    const std::string type = type_of(m);
    if (type == "register" && !workers_.count(from)) {
      send_message(socket_, from, {{"type", "refused"}, {"reason", reason}});
    } else if (sender == Sender::CLIENT) {
      Message answer = {{"type", "error"}, {"reason", reason}};
      if (m.is_object() && m.contains("client_req") && m["client_req"].is_number_unsigned() &&
          m["client_req"].get<std::uint64_t>() <= std::numeric_limits<std::int32_t>::max())
        answer = {{"type", "failed"}, {"req", m["client_req"]}, {"reason", reason}};
      send_message(socket_, from, answer);
    }
  }

  void handle(const std::string& from, Sender sender, const Message& m) {
    const std::string type = m["type"];
    if (type == "register") return register_worker(from, m);
    if (type == "heartbeat") return heartbeat(m);
    if (sender == Sender::CLIENT) {
      if (type == "submit") return submit(from, m);
      if (type == "abort") return abort(from, field_int(m, "client_req", 0, std::numeric_limits<std::int32_t>::max()));
      if (type == "status") return send_status(from);
      shutdown_ = true;  // the schema lets a client send nothing else
      return;
    }
    workers_.at(from).last_seen = now_seconds();
    if (type == "peer_refused") return peer_refused(from, m);
    if (type == "peer_added") return peer_added(from, m);
    const std::int64_t req = field_int(m, "req", 0, std::numeric_limits<std::int64_t>::max());
    const auto it = requests_.find(req);
    if (it == requests_.end()) {
      // A late word from one of its own workers (it failed or finished meanwhile) is no fault; any other is.
      const auto gone = ended_.find(req);
      check(gone != ended_.end() && (from == gone->second.first || from == gone->second.second), "'", type,
            "' for request ", req, " refused: ", req >= next_req_ ? "no such request" : "not this worker's request");
      return;
    }
    RoutedRequest& r = it->second;
    // A worker speaks only of the requests given to it, and only in the stage its reply is due.
    const auto due = [&](bool ok, const char* rule) {
      check(ok, "'", type, "' for request ", req, " refused: ", rule);
    };
    if (type == "failed") {
      due(from == r.prefill || from == r.decode, "only the request's own workers may fail it");
      return fail_request(req, describe(from) + ": " + field_string(m, "reason"));
    }
    r.deadline = now_seconds() + config_.request_timeout;
    if (type == "allocated" || type == "full") {
      due(from == r.decode && r.stage == Stage::ALLOCATING, "only its decode worker answers its alloc, once");
      if (type == "full") {
        // The request waits for blocks: back to the front of the queue, retried as decodes finish.
        if (now_seconds() - r.submitted > config_.request_timeout)
          return fail_request(req, "refused: " + field_string(m, "reason") + " for longer than --request-timeout");
        r.decode.clear();
        r.stage = Stage::QUEUED;
        pending_.push_front(req);
        return;
      }
      // A worker of both roles prefills its own requests: the prompt runs where its KV will live.
      r.prefill = workers_.at(r.decode).role == "both" ? r.decode : pick("prefill", r.decode);
      if (r.prefill.empty())
        return fail_request(req, "no prefill worker is registered that can reach " + describe(r.decode));
      r.stage = Stage::PREFILLING;
      r.accounting["prefill_worker"] = workers_.at(r.prefill).id;
      r.accounting["decode_worker"] = workers_.at(r.decode).id;
      Message prefill = {{"type", "prefill"},
                         {"req", req},
                         {"prompt", r.prompt},
                         {"dst_blocks", m["blocks"]},
                         {"decode_worker", workers_.at(r.decode).id}};
      prefill.update(r.sampling);
      send_message(socket_, r.prefill, prefill);
    } else if (type == "kv_sending" || type == "kv_ready") {
      due(from == r.prefill && r.stage == Stage::PREFILLING, "only its prefill worker reports its KV, once");
      Message forward = {{"type", type}, {"req", req}, {"src_blocks", m["src_blocks"]}};
      forward["prefill_worker"] = workers_.at(from).id;
      if (type == "kv_ready") {
        r.stage = Stage::DECODING;
        forward["first_token"] = m["first_token"];
        if (m.contains("accounting")) forward["accounting"] = m["accounting"];
        r.accounting.update(m.value("accounting", Message::object()));
        send_message(socket_, r.client, {{"type", "token"}, {"req", r.client_req}, {"token", m["first_token"]}});
      }
      send_message(socket_, r.decode, forward);
    } else if (type == "read_done") {
      due(from == r.decode && r.stage == Stage::DECODING, "only its decode worker confirms its read");
      send_message(socket_, r.prefill, {{"type", "read_done"}, {"req", req}});
    } else if (type == "token") {
      due(from == r.decode && r.stage == Stage::DECODING, "only its decode worker streams its tokens");
      send_message(socket_, r.client, {{"type", "token"}, {"req", r.client_req}, {"token", m["token"]}});
    } else {  // finished: the schema admits no other type from a worker
      due(from == r.decode && r.stage == Stage::DECODING, "only its decode worker finishes it");
      r.accounting.update(m.value("accounting", Message::object()));
      send_message(socket_, r.client, {{"type", "finished"}, {"req", r.client_req}, {"accounting", r.accounting}});
      remember_ended(req, r);
      requests_.erase(it);
    }
  }

  // A heartbeat from a worker's own heartbeat socket: it names the worker and the session it was given.
  void heartbeat(const Message& m) {
    const int id = static_cast<int>(field_int(m, "worker_id", 0, std::numeric_limits<std::int32_t>::max()));
    for (auto& [identity, w] : workers_)
      if (w.id == id) {
        check(same_key(field_string(m, "session"), w.session), "heartbeat for worker ", id, " with a wrong session");
        w.last_seen = now_seconds();
        return;
      }
    // A worker evicted meanwhile, or never registered: nothing to keep alive.
  }

  // Seconds between heartbeats, each way, and between looks for silent workers: four in each
  // --worker-timeout, so that one late beat is no eviction.
  double beat_interval() const { return std::min(config_.heartbeat_interval, config_.worker_timeout / 4); }

  // The first setting in which @p a and @p b, two registrations, differ, as one sentence; "" when they agree.
  static std::string mismatch(const Message& a, const Worker& b) {
    const std::string new_name = "this " + a["role"].get<std::string>() + " worker",
                      old_name = b.role + " worker " + std::to_string(b.id) + "'s";
    const auto differ = [&](const std::string& setting, const std::string& x, const std::string& y) {
      return new_name + "'s " + setting + " " + x + " differs from " + old_name + " " + y +
             ": the workers of a fleet must agree on it";
    };
    const KVLayout x = kv_layout_from_json(a["kv_layout"]), y = kv_layout_from_json(b.registration["kv_layout"]);
    if (a["model_hash"] != b.registration["model_hash"])
      return differ("model hash", a["model_hash"].get<std::string>(), b.registration["model_hash"].get<std::string>());
    if (x.block_size != y.block_size)
      return differ("KV block size (--block-size)", std::to_string(x.block_size), std::to_string(y.block_size));
    if (x.dtype_bytes != y.dtype_bytes)
      return differ("KV bytes per element (--dtype)", std::to_string(x.dtype_bytes), std::to_string(y.dtype_bytes));
    if (x.num_layers != y.num_layers || x.kv_dim != y.kv_dim)
      return differ("KV layers x kv_dim", std::to_string(x.num_layers) + "x" + std::to_string(x.kv_dim),
                    std::to_string(y.num_layers) + "x" + std::to_string(y.kv_dim));
    const auto tls = [](const Message& r) {
      const std::string t = r["ucx_tls"].get<std::string>();
      return t.empty() ? std::string("UCX's default") : "'" + t + "'";
    };
    if (a["ucx_tls"] != b.registration["ucx_tls"])
      return differ("UCX transports (UCX_TLS)", tls(a), tls(b.registration));
    return "";
  }

  void register_worker(const std::string& from, const Message& m) {
    check(!workers_.count(from), "register: this peer is registered already, as ", describe(from));
    const std::string role = field_string(m, "role");
    check(role == "prefill" || role == "decode" || role == "both",
          "register: role must be prefill, decode or both, got '", role, "'");
    // Relayed to every peer as it is: checked here, so that a malformed one never reaches a worker.
    (void)kv_layout_from_json(m["kv_layout"]);
    (void)transport_info_from_json(m["transport"]);
    for (const auto& [identity, w] : workers_)
      if (const std::string why = mismatch(m, w); !why.empty()) {
        ++malformed_;
        std::cerr << "servelab router: refused a " << role << " worker: " << why << "\n";
        send_message(socket_, from, {{"type", "refused"}, {"reason", why}});
        return;
      }
    Worker w{next_worker_++, role, m, now_seconds(), new_session()};
    w.registration.erase("key");
    w.registration["worker_id"] = w.id;
    send_message(
        socket_, from,
        {{"type", "registered"}, {"worker_id", w.id}, {"session", w.session}, {"heartbeat_interval", beat_interval()}});
    // The metadata exchange: each side learns the other role's transport keys once (a worker of
    // both roles may move KV to or from any other).
    for (const auto& [identity, other] : workers_)
      if (other.role != role || role == "both") {
        Message to_new = other.registration, to_other = w.registration;
        to_new["type"] = to_other["type"] = "peer";
        send_message(socket_, from, to_new);
        send_message(socket_, identity, to_other);
      }
    std::cerr << "servelab router: " << role << " worker " << w.id << " registered\n";
    workers_.emplace(from, std::move(w));
  }

  void submit(const std::string& from, const Message& m) {
    // The sampling settings are checked here too, so that a bad one is answered before any worker sees it.
    (void)sampling_from(m, std::numeric_limits<std::int32_t>::max());
    const std::int64_t req = next_req_++;
    RoutedRequest r{from, field_int(m, "client_req", 0, std::numeric_limits<std::int32_t>::max()), m["prompt"],
                    field_int(m, "max_tokens", 1, std::numeric_limits<std::int32_t>::max())};
    r.submitted = now_seconds();
    for (const char* key : {"sampling", "stop_token_ids"})
      if (m.contains(key)) r.sampling[key] = m[key];
    requests_.emplace(req, std::move(r));
    pending_.push_back(req);
    dispatch();
  }

  // A client's abort of its request @p client_req: its workers free it, the client hears "failed".
  void abort(const std::string& from, std::int64_t client_req) {
    for (const auto& [req, r] : requests_)
      if (r.client == from && r.client_req == client_req) return fail_request(req, "aborted by the client");
  }

  // Hands waiting requests, oldest first, to a decode worker for blocks.
  void dispatch() {
    while (!pending_.empty()) {
      const std::int64_t req = pending_.front();
      pending_.pop_front();
      const auto it = requests_.find(req);
      if (it == requests_.end()) continue;
      RoutedRequest& r = it->second;
      // A request arriving while workers start, or before a pair has linked, waits for one.
      r.decode = pick("decode");
      if (r.decode.empty()) {
        if (now_seconds() - r.submitted > config_.request_timeout) {
          fail_request(req, "no linked prefill and decode worker pair within --request-timeout");
          continue;
        }
        pending_.push_front(req);
        return;
      }
      r.stage = Stage::ALLOCATING;
      r.deadline = now_seconds() + config_.request_timeout;
      // The decode worker gets the prompt too: a request it preempts is recomputed there.
      Message alloc = {{"type", "alloc"}, {"req", req}, {"prompt", r.prompt}, {"max_tokens", r.max_tokens}};
      alloc.update(r.sampling);
      send_message(socket_, r.decode, alloc);
    }
  }

  // Fails every dispatched request its workers have said nothing about for request_timeout.
  void expire_dispatched(double now) {
    std::vector<std::int64_t> late;
    for (const auto& [req, r] : requests_)
      if (r.stage != Stage::QUEUED && now > r.deadline) late.push_back(req);
    for (std::int64_t req : late)
      fail_request(
          req, "no word from its workers within --request-timeout " + std::to_string(config_.request_timeout) + " s");
  }

  // Whether workers @p a and @p b have each added the other's transport (both said peer_added): only then
  // can KV move between them. Until then a request for the pair waits; it is not sent to fail on a timeout.
  bool linked(const std::string& a, const std::string& b) const {
    return linked_.count({a, b}) && linked_.count({b, a});
  }

  // Whether worker @p identity can serve now: one of both roles always (it may serve alone), any other once
  // it is linked to a worker of another role.
  bool has_partner(const std::string& identity) const {
    const std::string& role = workers_.at(identity).role;
    return role == "both" || std::any_of(workers_.begin(), workers_.end(), [&](const auto& p) {
             return p.second.role != role && linked(identity, p.first);
           });
  }

  // Identities of the workers that can serve @p role now: those of that role or of both, linked to
  // @p partner when one is named. Without a partner, a decode worker needs some linked prefill worker
  // unless it is of both roles (it then prefills its own requests).
  std::vector<std::string> of_role(const std::string& role, const std::string& partner = "") const {
    std::vector<std::string> out;
    for (const auto& [identity, w] : workers_) {
      if (w.role != role && w.role != "both") continue;
      const bool ready = !partner.empty() ? linked(identity, partner) : role == "decode" ? has_partner(identity) : true;
      if (ready) out.push_back(identity);
    }
    return out;
  }

  // Round robin over of_role(@p role, @p partner); one turn per role.
  std::string pick(const std::string& role, const std::string& partner = "") {
    const std::vector<std::string> able = of_role(role, partner);
    if (able.empty()) return "";
    return able[next_of_role_[role]++ % able.size()];
  }

  // The registered workers by role, and those of them linked to a partner (of both roles: always), for a
  // client that waits for its fleet before timing anything.
  void send_status(const std::string& to) {
    Message workers = Message::object(), paired = Message::object();
    for (const char* role : {"prefill", "decode", "both"}) workers[role] = paired[role] = 0;
    for (const auto& [identity, w] : workers_) {
      workers[w.role] = workers[w.role].get<int>() + 1;
      if (has_partner(identity)) paired[w.role] = paired[w.role].get<int>() + 1;
    }
    send_message(socket_, to,
                 {{"type", "status"},
                  {"workers", workers},
                  {"linked", paired},
                  {"requests", requests_.size()},
                  {"malformed_messages", malformed_}});
  }

  void fail_request(std::int64_t req, const std::string& reason) {
    const auto it = requests_.find(req);
    if (it == requests_.end()) return;
    std::cerr << "servelab router: request " << req << " failed: " << reason << "\n";
    for (const std::string& w : {it->second.prefill, it->second.decode})
      if (!w.empty() && workers_.count(w)) send_message(socket_, w, {{"type", "abort"}, {"req", req}});
    send_message(socket_, it->second.client, {{"type", "failed"}, {"req", it->second.client_req}, {"reason", reason}});
    remember_ended(req, it->second);
    requests_.erase(it);
  }

  // Keeps who served request @p req for a while after it ends, so that their late words are told from forgeries.
  void remember_ended(std::int64_t req, const RoutedRequest& r) {
    ended_[req] = {r.prefill, r.decode};
    if (ended_.size() > kEndedKept) ended_.erase(ended_.begin());
  }

  // The identity of the worker m["worker_id"] names in @p from's message @p type about it: one that @p from
  // was handed the transport of (it can take the other role, or one of the two is of both roles).
  std::string paired_peer(const std::string& from, const Message& m, const char* type) const {
    const std::int64_t id = field_int(m, "worker_id", 0, std::numeric_limits<std::int32_t>::max());
    const auto target =
        std::find_if(workers_.begin(), workers_.end(), [&](const auto& w) { return w.second.id == id; });
    check(target != workers_.end() && target->first != from, type, ": no other worker ", id, " is registered");
    const std::string& role = target->second.role;
    const std::string& own_role = workers_.at(from).role;
    check(role == "both" || own_role == "both" || own_role != role, type, ": ", describe(from),
          " is never paired with ", describe(target->first));
    return target->first;
  }

  // Worker @p from could not use the transport address or keys of the worker m["worker_id"] names (a
  // registration UCX cannot unpack): the two are never paired, and a worker that every worker of the other
  // role has refused is refused itself, as at registration, with the reason. A worker's word thus changes
  // only its own pairings, unless no other partner is left.
  void peer_refused(const std::string& from, const Message& m) {
    const std::string identity = paired_peer(from, m, "peer_refused"), reason = field_string(m, "reason");
    const std::string& role = workers_.at(identity).role;
    const std::string other = role == "prefill" ? "decode" : "prefill";
    refused_.insert({from, identity});
    std::cerr << "servelab router: " << describe(from) << " cannot reach " << describe(identity) << ": " << reason
              << "\n";
    if (role == "both") return;  // it can serve its requests alone
    const bool some_accept = std::any_of(workers_.begin(), workers_.end(), [&](const auto& w) {
      return (w.second.role == other || w.second.role == "both") && !refused_.count({w.first, identity}) &&
             !refused_.count({identity, w.first});
    });
    if (some_accept) return;
    send_message(socket_, identity,
                 {{"type", "refused"}, {"reason", describe(from) + " cannot use this worker's transport: " + reason}});
    remove_worker(identity, "refused by every worker of the other role");
  }

  // Worker @p from has added the transport of the worker m["worker_id"] names: once the other has added
  // @p from's too, the two may be paired, and requests waiting for a pair are dispatched.
  void peer_added(const std::string& from, const Message& m) {
    const std::string identity = paired_peer(from, m, "peer_added");
    if (refused_.count({from, identity})) return;  // a refusal stands
    linked_.insert({from, identity});
    dispatch();
  }

  void evict_silent(double now) {
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (now - it->second.last_seen <= config_.worker_timeout) {
        ++it;
        continue;
      }
      const std::string identity = it->first;
      ++it;
      remove_worker(identity, "stopped responding (silent for longer than --worker-timeout)");
    }
  }

  // Evicts worker @p identity for @p why: its requests fail and the others forget its transport.
  void remove_worker(const std::string& identity, const std::string& why) {
    const Worker gone = workers_.at(identity);
    workers_.erase(identity);
    std::cerr << "servelab router: " << gone.role << " worker " << gone.id << " " << why << ", evicted\n";
    std::vector<std::int64_t> failed;
    for (const auto& [req, r] : requests_)
      if (r.prefill == identity || r.decode == identity) failed.push_back(req);
    for (std::int64_t req : failed) fail_request(req, gone.role + " worker " + std::to_string(gone.id) + " " + why);
    for (auto* pairs : {&refused_, &linked_})
      std::erase_if(*pairs, [&](const auto& pair) { return pair.first == identity || pair.second == identity; });
    for (auto& [other, w] : workers_) send_message(socket_, other, {{"type", "peer_gone"}, {"worker_id", gone.id}});
  }

  RouterConfig config_;
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
  std::map<std::string, Worker> workers_;  // by ZeroMQ identity
  std::map<std::int64_t, RoutedRequest> requests_;
  static constexpr std::size_t kEndedKept = 4096;                      // ended requests remembered
  std::map<std::int64_t, std::pair<std::string, std::string>> ended_;  // request -> its (prefill, decode) workers
  std::set<std::pair<std::string, std::string>> refused_;  // (worker, peer whose transport it could not use)
  std::set<std::pair<std::string, std::string>> linked_;   // (worker, peer whose transport it has added)
  std::deque<std::int64_t> pending_;  // waiting for decode blocks, oldest first
  int next_worker_ = 0;
  std::int64_t next_req_ = 0;
  std::map<std::string, std::size_t> next_of_role_;  // round-robin turn per role
  long malformed_ = 0;                               // messages dropped: malformed, misdirected or unkeyed
  bool shutdown_ = false;
};

}  // namespace

void run_router(const RouterConfig& config) {
  check(config.worker_timeout > 0 && config.request_timeout > 0, "--worker-timeout and --request-timeout must be > 0");
  g_stop = 0;
  std::signal(SIGINT, [](int) { g_stop = 1; });
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  Router router(config);
  router.serve();
}

}  // namespace servelab::disagg
