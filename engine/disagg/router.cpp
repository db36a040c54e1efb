// SPDX-License-Identifier: MIT
#include "disagg/router.h"

#include <csignal>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <zmq.hpp>

#include "core/error.h"
#include "core/timer.h"
#include "disagg/control.h"

namespace servelab::disagg {

namespace {

volatile std::sig_atomic_t g_stop = 0;

struct Worker {
  int id = 0;
  std::string role;      // "prefill", "decode" or "both"
  Message registration;  // as sent, relayed to the other role
  double last_seen = 0;
};

struct RoutedRequest {
  std::string client;  // identity of the submitting client
  std::int64_t client_req = 0;
  Message prompt;  // token ids, as submitted (checked by the workers' engines)
  std::int64_t max_tokens = 0;
  Message sampling = Message::object();  // "sampling" and "stop_token_ids" as submitted, for both workers
  std::string prefill{}, decode{};       // identities; empty until chosen
  double submitted = 0;
  Message accounting = Message::object();
};

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
      if (auto in = receive_routed(socket_, 20)) {
        try {
          handle(in->first, in->second);
        } catch (const Error& e) {
          std::cerr << "servelab router: dropped a message from " << describe(in->first) << ": " << e.what() << "\n";
        }
      }
      const double now = now_seconds();
      if (now >= next_beat) {
        for (auto& [identity, w] : workers_) send_message(socket_, identity, {{"type", "heartbeat"}});
        evict_silent(now);
        next_beat = now + config_.heartbeat_interval;
      }
      if (now >= next_retry) {
        dispatch();
        next_retry = now + 0.05;
      }
    }
    for (auto& [identity, w] : workers_) send_message(socket_, identity, {{"type", "shutdown"}});
    // Let ZeroMQ hand the shutdowns over before the socket closes (linger is 0).
    const double until = now_seconds() + 0.2;
    while (now_seconds() < until) (void)receive_routed(socket_, 20);
  }

 private:
  std::string describe(const std::string& identity) const {
    const auto it = workers_.find(identity);
    return it == workers_.end() ? "a client" : it->second.role + " worker " + std::to_string(it->second.id);
  }

  void handle(const std::string& from, const Message& m) {
    const std::string type = m["type"];
    if (auto it = workers_.find(from); it != workers_.end()) it->second.last_seen = now_seconds();
    if (type == "register") return register_worker(from, m);
    if (type == "heartbeat") return;
    if (type == "submit") return submit(from, m);
    if (type == "shutdown") {
      shutdown_ = true;
      return;
    }
    if (type == "status") return send_status(from);
    const std::int64_t req = field_int(m, "req", 0, next_req_);
    const auto it = requests_.find(req);
    if (it == requests_.end()) return;  // finished or failed already (a late message)
    RoutedRequest& r = it->second;
    if (type == "allocated") {
      // A worker of both roles prefills its own requests: the prompt runs where its KV will live.
      r.prefill = workers_.at(r.decode).role == "both" ? r.decode : pick("prefill");
      if (r.prefill.empty()) return fail_request(req, "no prefill worker is registered");
      r.accounting["prefill_worker"] = workers_.at(r.prefill).id;
      r.accounting["decode_worker"] = workers_.at(r.decode).id;
      Message prefill = {{"type", "prefill"},
                         {"req", req},
                         {"prompt", r.prompt},
                         {"dst_blocks", m.at("blocks")},
                         {"decode_worker", workers_.at(r.decode).id}};
      prefill.update(r.sampling);
      send_message(socket_, r.prefill, prefill);
    } else if (type == "full") {
      // The request waits for blocks: back to the front of the queue, retried as decodes finish.
      if (now_seconds() - r.submitted > config_.request_timeout)
        return fail_request(req, "refused: " + field_string(m, "reason") + " for longer than --request-timeout");
      r.decode.clear();
      pending_.push_front(req);
    } else if (type == "kv_sending" || type == "kv_ready") {
      Message forward = m;
      forward["prefill_worker"] = workers_.at(from).id;
      send_message(socket_, r.decode, forward);
      if (type == "kv_ready") {
        r.accounting.update(m.value("accounting", Message::object()));
        send_message(socket_, r.client, {{"type", "token"}, {"req", r.client_req}, {"token", m.at("first_token")}});
      }
    } else if (type == "read_done") {
      send_message(socket_, r.prefill, m);
    } else if (type == "token") {
      send_message(socket_, r.client, {{"type", "token"}, {"req", r.client_req}, {"token", m.at("token")}});
    } else if (type == "finished") {
      r.accounting.update(m.value("accounting", Message::object()));
      send_message(socket_, r.client, {{"type", "finished"}, {"req", r.client_req}, {"accounting", r.accounting}});
      requests_.erase(it);
    } else if (type == "failed") {
      fail_request(req, describe(from) + ": " + field_string(m, "reason"));
    } else {
      fail("unknown message type '", type, "'");
    }
  }

  void register_worker(const std::string& from, const Message& m) {
    const std::string role = field_string(m, "role");
    check(role == "prefill" || role == "decode" || role == "both",
          "register: role must be prefill, decode or both, got '", role, "'");
    const std::string hash = field_string(m, "model_hash");
    for (const auto& [identity, w] : workers_)
      if (w.registration["model_hash"] != hash) {
        send_message(socket_, from,
                     {{"type", "refused"},
                      {"reason", "model hash " + hash + " differs from " + w.role + " worker " + std::to_string(w.id) +
                                     "'s " + w.registration["model_hash"].get<std::string>()}});
        return;
      }
    Worker w{next_worker_++, role, m, now_seconds()};
    w.registration["worker_id"] = w.id;
    send_message(socket_, from, {{"type", "registered"}, {"worker_id", w.id}});
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
    const std::int64_t req = next_req_++;
    RoutedRequest r{from, field_int(m, "client_req", 0, std::numeric_limits<std::int32_t>::max()), m.at("prompt"),
                    field_int(m, "max_tokens", 1, std::numeric_limits<std::int32_t>::max())};
    r.submitted = now_seconds();
    for (const char* key : {"sampling", "stop_token_ids"})
      if (m.contains(key)) r.sampling[key] = m[key];
    requests_.emplace(req, std::move(r));
    pending_.push_back(req);
    dispatch();
  }

  // Hands waiting requests, oldest first, to a decode worker for blocks.
  void dispatch() {
    while (!pending_.empty()) {
      const std::int64_t req = pending_.front();
      pending_.pop_front();
      const auto it = requests_.find(req);
      if (it == requests_.end()) continue;
      RoutedRequest& r = it->second;
      // Both roles must be there: a request arriving while workers start waits for them.
      const bool ready = !of_role("prefill").empty();
      r.decode = ready ? pick("decode") : "";
      if (r.decode.empty()) {
        if (now_seconds() - r.submitted > config_.request_timeout) {
          fail_request(req, "no prefill and decode worker pair registered within --request-timeout");
          continue;
        }
        pending_.push_front(req);
        return;
      }
      // The decode worker gets the prompt too: a request it preempts is recomputed there.
      Message alloc = {{"type", "alloc"}, {"req", req}, {"prompt", r.prompt}, {"max_tokens", r.max_tokens}};
      alloc.update(r.sampling);
      send_message(socket_, r.decode, alloc);
    }
  }

  // Identities of the workers that can take @p role: those of that role and those of both.
  std::vector<std::string> of_role(const std::string& role) const {
    std::vector<std::string> out;
    for (const auto& [identity, w] : workers_)
      if (w.role == role || w.role == "both") out.push_back(identity);
    return out;
  }

  // Round robin over of_role(@p role); one turn per role.
  std::string pick(const std::string& role) {
    const std::vector<std::string> able = of_role(role);
    if (able.empty()) return "";
    return able[next_of_role_[role]++ % able.size()];
  }

  // The registered workers by role, for a client that waits for its fleet before timing anything.
  void send_status(const std::string& to) {
    Message workers = Message::object();
    for (const char* role : {"prefill", "decode", "both"}) workers[role] = 0;
    for (const auto& [identity, w] : workers_) workers[w.role] = workers[w.role].get<int>() + 1;
    send_message(socket_, to, {{"type", "status"}, {"workers", workers}});
  }

  void fail_request(std::int64_t req, const std::string& reason) {
    const auto it = requests_.find(req);
    if (it == requests_.end()) return;
    std::cerr << "servelab router: request " << req << " failed: " << reason << "\n";
    for (const std::string& w : {it->second.prefill, it->second.decode})
      if (!w.empty() && workers_.count(w)) send_message(socket_, w, {{"type", "abort"}, {"req", req}});
    send_message(socket_, it->second.client, {{"type", "failed"}, {"req", it->second.client_req}, {"reason", reason}});
    requests_.erase(it);
  }

  void evict_silent(double now) {
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (now - it->second.last_seen <= config_.worker_timeout) {
        ++it;
        continue;
      }
      const std::string identity = it->first;
      const Worker gone = it->second;
      it = workers_.erase(it);
      std::cerr << "servelab router: " << gone.role << " worker " << gone.id << " silent for " << config_.worker_timeout
                << " s, evicted\n";
      std::vector<std::int64_t> failed;
      for (const auto& [req, r] : requests_)
        if (r.prefill == identity || r.decode == identity) failed.push_back(req);
      for (std::int64_t req : failed)
        fail_request(req, gone.role + " worker " + std::to_string(gone.id) + " stopped responding");
      for (auto& [other, w] : workers_) send_message(socket_, other, {{"type", "peer_gone"}, {"worker_id", gone.id}});
    }
  }

  RouterConfig config_;
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
  std::map<std::string, Worker> workers_;  // by ZeroMQ identity
  std::map<std::int64_t, RoutedRequest> requests_;
  std::deque<std::int64_t> pending_;  // waiting for decode blocks, oldest first
  int next_worker_ = 0;
  std::int64_t next_req_ = 0;
  std::map<std::string, std::size_t> next_of_role_;  // round-robin turn per role
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
