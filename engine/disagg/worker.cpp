// SPDX-License-Identifier: MIT
#include "disagg/worker.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>
#include <stop_token>
#include <thread>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/timer.h"
#include "disagg/decode_role.h"
#include "disagg/kv_transfer_plan.h"
#include "disagg/link.h"
#include "disagg/prefill_role.h"
#include "disagg/process.h"
#include "disagg/ucx_transport.h"
#include "model/model.h"
#include "serve/engine.h"

namespace servelab::disagg {

namespace {

std::string hex64(std::uint64_t v) {
  std::ostringstream os;
  os << std::hex << std::setw(16) << std::setfill('0') << v;
  return os.str();
}

// A DEALER connected to the router that --router names, or --router-file holds; a word that is not
// a ZeroMQ endpoint is an error naming the flag (and the file).
zmq::socket_t connect_router(zmq::context_t& context, const WorkerConfig& c) {
  check(!c.router.empty() || !c.router_file.empty(), "--router or --router-file is required");
  const std::string endpoint = c.router.empty() ? wait_for_endpoint_file(c.router_file, c.router_timeout) : c.router;
  try {
    return connect_dealer(context, endpoint);
  } catch (const zmq::error_t& e) {
    const std::string source = c.router.empty() ? "--router-file " + c.router_file + " holds" : "--router is";
    fail(source, " '", endpoint.substr(0, 80), "', not a ZeroMQ endpoint (", e.what(),
         "); expected tcp://HOST:PORT, as the router prints and writes to its --endpoint-file");
  }
}

std::unique_ptr<Model> load_model(const WorkerConfig& c) {
  check(c.kv_timeout > 0 && c.router_timeout > 0, "--kv-timeout and --router-timeout must be > 0");
  check(!c.layerwise || c.mode == TransferMode::WRITE, "--layerwise streams writes: it needs --kv-transfer write, got ",
        to_string(c.mode));
  // The streamer's thread owns the transport during a step, so a step may stream one prompt only,
  // and a worker of both roles, whose decodes share its steps, does not stream (a decode worker
  // takes the flag and ignores it: the prefill side streams).
  // A layer's KV is final only after the prompt's last chunk: streaming needs the prompt in one step.
  check(!c.layerwise || !c.enable_chunked_prefill,
        "--layerwise streams one forward pass: it cannot take "
        "--enable-chunked-prefill");
  check(!c.layerwise || c.role != WorkerRole::BOTH,
        "--layerwise streams from a prefill worker's steps: it needs --role "
        "prefill (or decode, which ignores it), got both");
  return cli::load_model(c.model);
}

EngineConfig engine_config(const WorkerConfig& c) {
  EngineConfig e;
  e.block_size = c.block_size;
  e.num_gpu_blocks_override = c.num_blocks;
  e.scheduler.max_num_seqs = c.layerwise && c.role == WorkerRole::PREFILL ? 1 : c.max_num_seqs;
  e.scheduler.max_num_batched_tokens = c.max_num_batched_tokens;
  e.scheduler.enable_chunked_prefill = c.enable_chunked_prefill;
  e.scheduler.hold_finished_kv = true;  // each role releases a request once its KV has been moved or it has finished
  e.log = [role = std::string(to_string(c.role))](const std::string& line) {
    std::cerr << "servelab worker (" << role << "): " << line << "\n";
  };
  return e;
}

// One engine, its transport and the router socket; the roles handle their messages and outputs.
class Worker {
 public:
  explicit Worker(const WorkerConfig& c)
      : c_(c),
        model_(load_model(c)),
        hash_(model_hash(c.model)),
        engine_(*model_, engine_config(c)),
        context_{.config = c_, .engine = engine_, .transport = transport_, .socket = socket_} {
    context_.pace = emulated_rate(find_link(c.link, "--link"), model_->config(), preset(c.link_model));
    context_.vocab_size = model_->config().vocab_size;
    register_kv_cache(transport_, engine_.kv_cache());
    context_.layout = kv_layout_of(engine_.kv_cache());
    if (c.layerwise && c.role == WorkerRole::PREFILL)
      model_->set_layer_hook([this](int layer) { prefill_.on_layer(layer); });
    socket_ = connect_router(zmq_, c);
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }

  WorkerSummary serve() {
    register_with_router();
    double last_heard = now_seconds();
    bool shutdown = false;
    while (!shutdown) {
      // Busy (a step to run, or KV on its way in or out): look and go back to work, so that UCX
      // progresses often; over TCP the target of a put or get must serve it. Idle: sleep in the poll.
      const bool busy = engine_.has_unfinished_requests() || prefill_.holding() || decode_.waiting_for_kv();
      // Whatever a message holds or causes (a frame that is not JSON, a field of the wrong type, a
      // zmq error), it is dropped and counted: only the router's shutdown or silence ends the loop.
      bool heard = false;
      try {
        if (const auto m = receive_message(socket_, busy ? 0 : 2)) {
          last_heard = now_seconds();
          heard = true;
          shutdown = handle(*m);
        }
      } catch (const std::exception& e) {
        context_.dropped(e.what());
      }
      transport_.progress();
      const double now = now_seconds();
      // Silence is judged only after a receive that found nothing queued: handling a message or a step
      // may itself take seconds (a peer check that times out after kCheckSeconds), and the router's
      // heartbeats wait in the socket meanwhile.
      if (!heard && now - last_heard > c_.router_timeout) {
        std::cerr << "servelab worker (" << to_string(c_.role) << "): no word from the router for " << c_.router_timeout
                  << " s; exiting\n";
        break;
      }
      prefill_.expire(now);
      decode_.expire(now);
      // READ mode: no step while KV waits to be read, because a get completes only while this side
      // progresses UCX, which a forward pass does not.
      if (engine_.has_unfinished_requests() && !prefill_.holding()) step();
    }
    const BlockPool& pool = engine_.kv_cache_manager().block_pool();
    return {context_.served, pool.num_blocks() - pool.num_free_blocks(), pool.num_blocks(), context_.malformed};
  }

 private:
  void register_with_router() {
    // UCX_TLS goes along: the router refuses a pair whose transports differ, before a request fails on it.
    const char* tls = std::getenv("UCX_TLS");
    context_.send({{"type", "register"},
                   {"role", to_string(c_.role)},
                   {"transport", to_json(transport_.local_info())},
                   {"kv_layout", to_json(context_.layout)},
                   {"model_hash", hash_},
                   {"ucx_tls", tls ? tls : ""}});
    const auto answer = receive_message(socket_, static_cast<int>(c_.router_timeout * 1000));
    check(answer.has_value(), "router: no answer to the registration within --router-timeout ", c_.router_timeout,
          " s");
    check_schema(*answer, Sender::ROUTER);
    if ((*answer)["type"] == "refused") fail("router refused the registration: ", field_string(*answer, "reason"));
    check((*answer)["type"] == "registered", "router: expected 'registered', got ", json_brief((*answer)["type"]));
    context_.self_id = field_worker(*answer, "worker_id");
    const double interval = field_number(*answer, "heartbeat_interval", 0, 3600);
    // The router judges a worker by the same rule: silent after four missed beats, so one late beat
    // (a loaded machine, a long step on the router's side) is no exit.
    if (c_.router_timeout < 4 * interval)
      std::cerr << "servelab worker (" << to_string(c_.role) << "): warning: --router-timeout " << c_.router_timeout
                << " s is under four of the router's heartbeats (" << interval
                << " s each); a late beat or two will look like a dead router\n";
    heartbeats_ = std::jthread([this, session = field_string(*answer, "session"), interval](std::stop_token stop) {
      beat(stop, session, interval);
    });
  }

  // The heartbeat thread: its own socket (a ZeroMQ socket belongs to one thread), naming this worker
  // and its session, so that the router hears it while the loop is inside a long engine step.
  // @p interval: seconds between beats, as the router asked.
  void beat(const std::stop_token& stop, const std::string& session, double interval) {
    zmq::socket_t socket = connect_dealer(zmq_, endpoint_);
    Message beat = {{"type", "heartbeat"}, {"worker_id", context_.self_id}, {"session", session}};
    if (!c_.cluster_key.empty()) beat["key"] = c_.cluster_key;
    double next = 0;
    while (!stop.stop_requested()) {  // short sleeps: the worker's exit waits for this thread
      if (now_seconds() >= next) {
        send_message(socket, beat);
        next = now_seconds() + interval;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // One engine step; each output goes to the role whose request it is.
  void step() {
    const double t0 = now_seconds();
    const std::vector<RequestOutput> outputs = engine_.step();
    const double t1 = now_seconds();
    for (const RequestOutput& out : outputs) {
      if (prefill_.owns(out.request_id))
        prefill_.on_first_token(out, t0, t1);
      else if (decode_.owns(out.request_id))
        decode_.on_token(out, t0, t1);
    }
  }

  // Returns true on shutdown.
  bool handle(const Message& m) {
    check_schema(m, Sender::ROUTER);
    const std::string type = m["type"];
    if (type == "shutdown") return true;
    if (type == "heartbeat" || type == "registered") return false;
    if (type == "peer") {
      add_peer(m);
    } else if (type == "peer_gone") {
      if (auto it = context_.peers.find(field_worker(m, "worker_id")); it != context_.peers.end()) {
        transport_.remove_peer(it->second.handle);
        context_.peers.erase(it);
      }
    } else if (type == "prefill") {
      // Role both, decoding this request itself: the prompt runs straight into the blocks it holds.
      if (field_worker(m, "decode_worker") == context_.self_id)
        decode_.prefill_locally(m);
      else
        prefill_.prefill(m);
    } else if (type == "read_done") {
      prefill_.read_done(field_req(m));
    } else if (type == "alloc") {
      decode_.alloc(m);
    } else if (type == "kv_sending" || type == "kv_ready") {
      decode_.kv(m, type == "kv_ready");
    } else if (type == "abort") {
      const std::int64_t req = field_req(m);
      prefill_.abort(req);
      decode_.abort(req);
    } else {
      fail("'", type, "' is not a message for a worker");
    }
    return false;
  }

  void add_peer(const Message& m) {
    const int id = field_worker(m, "worker_id");
    const std::string hash = field_string(m, "model_hash");
    check(hash == hash_, "peer worker ", id, " serves model ", hash, ", this one ", hash_, "; not connecting");
    check(!context_.peers.count(id), "peer worker ", id, " is known already");
    const KVLayout layout = kv_layout_from_json(m["kv_layout"]);
    check(layout.compatible(context_.layout), "peer worker ", id,
          ": its KV layout is not this worker's (block size, layers or kv_dim)");
    int handle = 0;
    try {
      handle = transport_.add_peer(transport_info_from_json(m["transport"]));
    } catch (const Error& e) {
      // The router hears it, so that it neither pairs the two nor keeps a worker that no partner can reach.
      context_.send({{"type", "peer_refused"}, {"worker_id", id}, {"reason", e.what()}});
      throw;
    }
    context_.peers[id] = {handle, layout};
    context_.send({{"type", "peer_added"}, {"worker_id", id}});  // the router pairs the two once both have said so
  }

  WorkerConfig c_;
  std::unique_ptr<Model> model_;  // first: load_model() checks the flags before anything else runs
  std::string hash_;              // model_hash(c_.model), read once: --model reads config.json for it
  Engine engine_;
  UcxTransport transport_;
  zmq::context_t zmq_;
  zmq::socket_t socket_;
  std::string endpoint_;  // the router's, for the heartbeat socket
  WorkerContext context_;
  PrefillRole prefill_{context_};
  DecodeRole decode_{context_};
  std::jthread heartbeats_;  // last: stopped and joined before anything it reads goes
};

}  // namespace

// The wire's and the flag's names, in one table that both directions read.
constexpr EnumNames<WorkerRole, 3> kRoleNames{
    {{{WorkerRole::PREFILL, "prefill"}, {WorkerRole::DECODE, "decode"}, {WorkerRole::BOTH, "both"}}}};

const char* to_string(WorkerRole role) { return kRoleNames.name(role); }

WorkerRole parse_worker_role(const std::string& text, const std::string& what) { return kRoleNames.parse(text, what); }

const Peer& WorkerContext::peer(int worker_id) const {
  const auto it = peers.find(worker_id);
  check(it != peers.end(), "no transport to worker ", worker_id, " (its registration has not arrived)");
  return it->second;
}

std::vector<std::int32_t> WorkerContext::blocks_of(int request_id) const {
  const auto ids = engine.kv_cache_manager().block_table(request_id).block_ids();
  return {ids.begin(), ids.end()};
}

std::string WorkerContext::checksum(int request_id, int num_tokens) const {
  return hex64(kv_checksum(engine.kv_cache(), blocks_of(request_id), num_tokens));
}

void WorkerContext::dropped(const std::string& why) {
  ++malformed;
  if (malformed <= 20 || malformed % 1000 == 0)
    std::cerr << "servelab worker (" << to_string(config.role) << "): dropped a message (" << malformed
              << " so far): " << why << "\n";
}

std::int64_t field_req(const Message& m, const char* key) {
  return field_int(m, key, 0, std::numeric_limits<std::int64_t>::max());
}

int field_worker(const Message& m, const char* key) {
  return static_cast<int>(field_int(m, key, 0, std::numeric_limits<int>::max()));
}

std::string model_hash(const cli::ModelFlags& m) {
  std::string identity;
  if (m.model_dir.empty()) {
    identity = "preset:" + m.preset + ":seed:" + std::to_string(m.weights_seed);
  } else {
    std::ifstream in(std::filesystem::path(m.model_dir) / "config.json");
    check(in.good(), "--model ", m.model_dir, ": cannot read config.json");
    identity.assign(std::istreambuf_iterator<char>(in), {});
  }
  // bf16 weights make other KV than f32 ones: a pair must load the same weights.
  return hex64(fnv1a(identity + ":dtype:" + m.dtype));
}

WorkerSummary run_worker(const WorkerConfig& config) {
  Worker worker(config);
  return worker.serve();
}

}  // namespace servelab::disagg
