// SPDX-License-Identifier: MIT
#include "disagg/worker.h"

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/hash.h"
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

std::string read_endpoint(const WorkerConfig& c) {
  if (!c.router.empty()) return c.router;
  check(!c.router_file.empty(), "--router or --router-file is required");
  return wait_for_endpoint_file(c.router_file, c.router_timeout);
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
    socket_ = connect_dealer(zmq_, read_endpoint(c));
  }

  WorkerSummary serve() {
    register_with_router();
    double last_heard = now_seconds(), next_beat = 0;
    bool shutdown = false;
    while (!shutdown) {
      // Busy (a step to run, or KV on its way in or out): look and go back to work, so that UCX
      // progresses often; over TCP the target of a put or get must serve it. Idle: sleep in the poll.
      const bool busy = engine_.has_unfinished_requests() || prefill_.holding() || decode_.waiting_for_kv();
      const auto m = receive_message(socket_, busy ? 0 : 2);
      transport_.progress();
      const double now = now_seconds();
      if (m) {
        last_heard = now;
        try {
          shutdown = handle(*m);
        } catch (const Error& e) {
          std::cerr << "servelab worker (" << to_string(c_.role) << "): " << e.what() << "\n";
        }
      }
      if (now - last_heard > c_.router_timeout) {
        std::cerr << "servelab worker (" << to_string(c_.role) << "): no word from the router for " << c_.router_timeout
                  << " s; exiting\n";
        break;
      }
      if (now >= next_beat) {
        send_message(socket_, {{"type", "heartbeat"}});
        next_beat = now + c_.heartbeat_interval;
      }
      prefill_.expire(now);
      decode_.expire(now);
      // READ mode: no step while KV waits to be read, because a get completes only while this side
      // progresses UCX, which a forward pass does not.
      if (engine_.has_unfinished_requests() && !prefill_.holding()) step();
    }
    const BlockPool& pool = engine_.kv_cache_manager().block_pool();
    return {context_.served, pool.num_blocks() - pool.num_free_blocks(), pool.num_blocks()};
  }

 private:
  void register_with_router() {
    send_message(socket_, {{"type", "register"},
                           {"role", to_string(c_.role)},
                           {"transport", to_json(transport_.local_info())},
                           {"kv_layout", to_json(context_.layout)},
                           {"model_hash", hash_}});
    const auto answer = receive_message(socket_, static_cast<int>(c_.router_timeout * 1000));
    check(answer.has_value(), "router: no answer to the registration within --router-timeout ", c_.router_timeout,
          " s");
    check((*answer)["type"] != "refused",
          "router refused the registration: ", answer->value("reason", std::string("no reason given")));
    check((*answer)["type"] == "registered", "router: expected 'registered', got '", (*answer)["type"], "'");
    context_.self_id = field_worker(*answer, "worker_id");
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
      fail("unknown message type '", type, "'");
    }
    return false;
  }

  void add_peer(const Message& m) {
    const int id = field_worker(m, "worker_id");
    const std::string hash = field_string(m, "model_hash");
    check(hash == hash_, "peer worker ", id, " serves model ", hash, ", this one ", hash_, "; not connecting");
    const KVLayout layout = kv_layout_from_json(m.at("kv_layout"));
    check(layout.compatible(context_.layout), "peer worker ", id,
          ": its KV layout is not this worker's (block size, layers or kv_dim)");
    context_.peers[id] = {transport_.add_peer(transport_info_from_json(m.at("transport"))), layout};
  }

  WorkerConfig c_;
  std::unique_ptr<Model> model_;  // first: load_model() checks the flags before anything else runs
  std::string hash_;              // model_hash(c_.model), read once: --model reads config.json for it
  Engine engine_;
  UcxTransport transport_;
  zmq::context_t zmq_;
  zmq::socket_t socket_;
  WorkerContext context_;
  PrefillRole prefill_{context_};
  DecodeRole decode_{context_};
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
