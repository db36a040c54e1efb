#include "disagg/worker.h"

#include <deque>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/hash.h"
#include "core/timer.h"
#include "disagg/control.h"
#include "disagg/kv_transfer_plan.h"
#include "disagg/layer_streamer.h"
#include "disagg/link.h"
#include "disagg/process.h"
#include "disagg/ucx_transport.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/model.h"

namespace servelab::disagg {

namespace {

// Tags of SEND mode's messages: the request id in the high half, the piece index in the low.
std::uint64_t send_tag(std::int64_t req) { return static_cast<std::uint64_t>(req + 1) << 32; }

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

struct Peer {
  int handle = 0;  // Transport peer handle
  KVLayout layout;
};

// A request on the decode side.
struct DecodeRequest {
  std::vector<std::int32_t> blocks;  // prompt + max_tokens worth, reserved at ALLOC
  std::vector<std::int32_t> tokens;  // prompt (unknown here: only its length) then output; see num_tokens
  int num_prompt_tokens = 0;
  int max_tokens = 0;
  int num_computed = 0;               // tokens whose KV is in the blocks
  double deadline = 0;                // free the blocks if the KV has not arrived by then
  bool running = false;
  bool received = false;              // SEND mode: the tagged messages arrived
  double read_seconds = 0;            // READ mode: how long the get took
  Message accounting = Message::object();
};

class Worker {
 public:
  explicit Worker(const WorkerConfig& c) : c_(c) {
    check(c.role == "prefill" || c.role == "decode" || c.role == "both", "--role must be prefill, decode or both, got '",
          c.role, "'");
    check(c.kv_timeout > 0 && c.router_timeout > 0, "--kv-timeout and --router-timeout must be > 0");
    check(!c.layerwise || c.mode == TransferMode::WRITE, "--layerwise streams writes: it needs --kv-transfer write, got ",
          to_string(c.mode));
    const Link& link = find_link(c.link, "--link");
    EngineOptions options;
    options.num_threads = c.threads;
    options.deterministic = c.deterministic;
    model_ = c.model_dir.empty() ? Model::from_preset(c.preset, c.weights_seed, options)
                                 : Model::from_pretrained(c.model_dir, options);
    pace_ = emulated_rate(link, model_->config(), preset(c.link_model));
    cache_ = model_->make_kv_cache(c.num_blocks, c.block_size);
    pool_ = std::make_unique<BlockPool>(c.num_blocks);
    register_kv_cache(transport_, *cache_);
    layout_ = kv_layout_of(*cache_);
    hash_ = model_hash(c.preset, c.model_dir, c.weights_seed);
    socket_ = connect_dealer(context_, read_endpoint(c));
  }

  WorkerSummary serve() {
    send_message(socket_, {{"type", "register"}, {"role", c_.role}, {"transport", to_json(transport_.local_info())},
                           {"kv_layout", to_json(layout_)}, {"model_hash", hash_}});
    const auto answer = receive_message(socket_, static_cast<int>(c_.router_timeout * 1000));
    check(answer.has_value(), "router: no answer to the registration within --router-timeout ", c_.router_timeout, " s");
    check((*answer)["type"] != "refused", "router refused the registration: ",
          answer->value("reason", std::string("no reason given")));
    check((*answer)["type"] == "registered", "router: expected 'registered', got '", (*answer)["type"], "'");
    self_id_ = static_cast<int>(field_int(*answer, "worker_id", 0, std::numeric_limits<int>::max()));
    double last_heard = now_seconds(), next_beat = 0;
    bool shutdown = false;
    while (!shutdown) {
      // Busy (decoding, or KV on its way in or out): look and go back to work, so that UCX
      // progresses often; over TCP the target of a put or get must serve it. Idle: sleep in the poll.
      const bool busy = !running_.empty() || !held_.empty() || !pending_.empty() || decode_.size() > running_.size();
      const auto m = receive_message(socket_, busy ? 0 : 2);
      transport_.progress();
      const double now = now_seconds();
      if (m) {
        last_heard = now;
        try {
          shutdown = handle(*m);
        } catch (const Error& e) {
          std::cerr << "servelab worker (" << c_.role << "): " << e.what() << "\n";
        }
      }
      if (now - last_heard > c_.router_timeout) {
        std::cerr << "servelab worker (" << c_.role << "): no word from the router for " << c_.router_timeout
                  << " s; exiting\n";
        break;
      }
      if (now >= next_beat) {
        send_message(socket_, {{"type", "heartbeat"}});
        next_beat = now + c_.heartbeat_interval;
      }
      expire(now);
      // READ mode: the next prompt waits until decode has read the last one's KV (or kv_timeout),
      // because a get completes only while this side progresses UCX, which a forward pass does not.
      if (!pending_.empty() && held_.empty()) {
        const Message next = std::move(pending_.front());
        pending_.pop_front();
        prefill(next);
      }
      if (!running_.empty()) decode_step();
    }
    const WorkerSummary summary{served_, pool_->num_blocks() - pool_->num_free_blocks(), pool_->num_blocks()};
    for (auto& [req, r] : decode_) pool_->free_blocks(r.blocks);
    for (auto& [req, held] : held_) pool_->free_blocks(held.first);
    return summary;
  }

 private:
  // Returns true on shutdown.
  bool handle(const Message& m) {
    const std::string type = m["type"];
    if (type == "shutdown") return true;
    if (type == "heartbeat" || type == "registered") return false;
    if (type == "peer") {
      add_peer(m);
    } else if (type == "peer_gone") {
      const int id = static_cast<int>(field_int(m, "worker_id", 0, std::numeric_limits<int>::max()));
      if (auto it = peers_.find(id); it != peers_.end()) {
        transport_.remove_peer(it->second.handle);
        peers_.erase(it);
      }
    } else if (type == "prefill") {
      pending_.push_back(m);
    } else if (type == "read_done") {
      release_held(field_int(m, "req", 0, std::numeric_limits<std::int64_t>::max()));
    } else if (type == "alloc") {
      alloc(m);
    } else if (type == "kv_sending" || type == "kv_ready") {
      take_kv(m, type == "kv_ready");
    } else if (type == "abort") {
      const std::int64_t req = field_int(m, "req", 0, std::numeric_limits<std::int64_t>::max());
      release_held(req);
      std::erase_if(pending_, [&](const Message& p) { return p.value("req", std::int64_t{-1}) == req; });
      drop(req);
    } else {
      fail("unknown message type '", type, "'");
    }
    return false;
  }

  void add_peer(const Message& m) {
    const int id = static_cast<int>(field_int(m, "worker_id", 0, std::numeric_limits<int>::max()));
    const std::string hash = field_string(m, "model_hash");
    check(hash == hash_, "peer worker ", id, " serves model ", hash, ", this one ", hash_, "; not connecting");
    const KVLayout layout = kv_layout_from_json(m.at("kv_layout"));
    check(layout.compatible(layout_), "peer worker ", id, ": its KV layout is not this worker's (block size, layers or kv_dim)");
    peers_[id] = {transport_.add_peer(transport_info_from_json(m.at("transport"))), layout};
  }

  const Peer& peer(const Message& m, const char* key) {
    const int id = static_cast<int>(field_int(m, key, 0, std::numeric_limits<int>::max()));
    const auto it = peers_.find(id);
    check(it != peers_.end(), "no transport to worker ", id, " (its registration has not arrived)");
    return it->second;
  }

  void report_failure(std::int64_t req, const std::string& reason) {
    send_message(socket_, {{"type", "failed"}, {"req", req}, {"reason", reason}});
  }

  // --- prefill role ---------------------------------------------------------------------

  void prefill(const Message& m) {
    const std::int64_t req = field_int(m, "req", 0, std::numeric_limits<std::int64_t>::max());
    std::vector<std::int32_t> blocks;
    try {
      const std::vector<std::int32_t> prompt = field_ids(m, "prompt", model_->config().vocab_size - 1);
      check(!prompt.empty(), "the prompt is empty");
      if (field_int(m, "decode_worker", 0, std::numeric_limits<int>::max()) == self_id_) return prefill_local(m, req, prompt);
      const Peer& decode = peer(m, "decode_worker");
      const std::vector<std::int32_t> dst = field_ids(m, "dst_blocks", decode.layout.num_blocks - 1);
      const int n = static_cast<int>(prompt.size());
      const int needed = (n + c_.block_size - 1) / c_.block_size;
      check(pool_->num_free_blocks() >= needed, "prefill worker has ", pool_->num_free_blocks(),
            " free KV blocks, the prompt needs ", needed);
      blocks = pool_->get_new_blocks(needed);
      Batch batch;
      batch.add(blocks, 0, prompt);
      const TransferPlan plan = plan_transfer(layout_, blocks, decode.layout, dst, n, 0, layout_.num_layers);
      const TransferOptions options{.timeout_seconds = c_.kv_timeout, .pace_bytes_per_second = pace_};
      std::optional<LayerStreamer> streamer;
      std::size_t streamed_descriptors = 0;  // per-layer plans coalesce within a layer only
      if (c_.layerwise) {
        std::vector<std::vector<TransferDescriptor>> layers;
        for (int l = 0; l < layout_.num_layers; ++l) {
          layers.push_back(plan_transfer(layout_, blocks, decode.layout, dst, n, l, l + 1).descriptors);
          streamed_descriptors += layers.back().size();
        }
        streamer.emplace(transport_, decode.handle, std::move(layers), options);
        model_->set_layer_hook([&](int l) { streamer->layer_done(l); });
      }
      const double t0 = now_seconds();
      std::int32_t first = 0;
      try {
        first = model_->forward_greedy(batch, *cache_).at(0);
      } catch (...) {
        model_->set_layer_hook({});
        throw;
      }
      const double t1 = now_seconds();
      model_->set_layer_hook({});
      Message accounting = {{"mode", to_string(c_.mode)}, {"prompt_tokens", n}, {"bytes", plan.bytes},
                            {"descriptors_uncoalesced", plan.num_uncoalesced},
                            {"descriptors", plan.descriptors.size()}, {"prefill_ms", (t1 - t0) * 1e3},
                            {"src_checksum", hex64(kv_checksum(*cache_, blocks, n))},
                            {"paced_bytes_per_second", pace_}, {"layerwise", c_.layerwise}};
      Message ready = {{"type", "kv_ready"}, {"req", req}, {"first_token", first}, {"src_blocks", blocks}};
      if (c_.mode == TransferMode::READ) {
        // vLLM's delayed free: the blocks stay until decode has read them, or kv_timeout.
        ready["accounting"] = accounting;
        send_message(socket_, ready);
        held_[req] = {blocks, now_seconds() + c_.kv_timeout};
        ++served_;
        return;
      }
      if (streamer) {
        // Per layer: the link was busy for busy_seconds, overlapped_seconds of them while the forward ran;
        // the request waited exposed_ms beyond its compute for the last layer.
        const StreamStats st = streamer->finish(t0, t1);
        accounting["transfer_ms"] = st.busy_seconds * 1e3;
        accounting["gb_per_s"] = static_cast<double>(plan.bytes) / st.busy_seconds / 1e9;
        accounting["transfer_over_prefill"] = st.busy_seconds / (t1 - t0);
        accounting["overlapped_ms"] = st.overlapped_seconds * 1e3;
        accounting["overlap_fraction"] = st.overlapped_seconds / st.busy_seconds;
        accounting["exposed_ms"] = std::max(0.0, st.end - t1) * 1e3;
        accounting["descriptors"] = streamed_descriptors;
        ready["accounting"] = accounting;
        pool_->free_blocks(blocks);
        send_message(socket_, ready);
        ++served_;
        return;
      }
      const double t_send = now_seconds();  // the transfer alone: the checksum above is the lab's, not the protocol's
      if (c_.mode == TransferMode::SEND) {
        send_message(socket_, {{"type", "kv_sending"}, {"req", req}, {"src_blocks", blocks}});
        transport_.send(decode.handle, send_tag(req), plan.descriptors, options);
      } else {
        transport_.write(decode.handle, plan.descriptors, options);
      }
      const double t2 = now_seconds();
      accounting["transfer_ms"] = (t2 - t_send) * 1e3;
      accounting["gb_per_s"] = static_cast<double>(plan.bytes) / (t2 - t_send) / 1e9;
      accounting["transfer_over_prefill"] = (t2 - t_send) / (t1 - t0);
      ready["accounting"] = accounting;
      pool_->free_blocks(blocks);
      send_message(socket_, ready);
      ++served_;
    } catch (const Error& e) {
      if (!blocks.empty() && !held_.count(req)) pool_->free_blocks(blocks);
      report_failure(req, e.what());
    }
  }

  // Role both, decoding this request itself: the prompt runs straight into the blocks reserved at
  // ALLOC, and nothing moves.
  void prefill_local(const Message& m, std::int64_t req, const std::vector<std::int32_t>& prompt) {
    const int n = static_cast<int>(prompt.size());
    const std::vector<std::int32_t> dst = field_ids(m, "dst_blocks", pool_->num_blocks() - 1);
    check(static_cast<long>(dst.size()) * c_.block_size >= n, "ALLOC gave ", dst.size(), " blocks for a ", n, "-token prompt");
    Batch batch;
    batch.add(dst, 0, prompt);
    const double t0 = now_seconds();
    const std::int32_t first = model_->forward_greedy(batch, *cache_).at(0);
    const Message accounting = {{"mode", "local"}, {"prompt_tokens", n}, {"bytes", 0}, {"descriptors_uncoalesced", 0},
                                {"descriptors", 0}, {"prefill_ms", (now_seconds() - t0) * 1e3}, {"transfer_ms", 0.0},
                                {"src_checksum", hex64(kv_checksum(*cache_, dst, n))}, {"paced_bytes_per_second", 0.0}};
    send_message(socket_, {{"type", "kv_ready"}, {"req", req}, {"first_token", first}, {"src_blocks", dst},
                           {"accounting", accounting}});
    ++served_;
  }

  void release_held(std::int64_t req) {
    if (auto it = held_.find(req); it != held_.end()) {
      pool_->free_blocks(it->second.first);
      held_.erase(it);
    }
  }

  // --- decode role ----------------------------------------------------------------------

  void alloc(const Message& m) {
    const std::int64_t req = field_int(m, "req", 0, std::numeric_limits<std::int64_t>::max());
    const int n = static_cast<int>(field_int(m, "num_tokens", 1, std::numeric_limits<std::int32_t>::max()));
    const int max_tokens = static_cast<int>(field_int(m, "max_tokens", 1, std::numeric_limits<std::int32_t>::max()));
    const long total = static_cast<long>(n) + max_tokens;
    if (total > model_->config().max_position_embeddings)
      return report_failure(req, "prompt + max_tokens = " + std::to_string(total) + " exceeds max_position_embeddings " +
                                     std::to_string(model_->config().max_position_embeddings));
    const int needed = static_cast<int>((total + c_.block_size - 1) / c_.block_size);
    if (needed > pool_->num_blocks())
      return report_failure(req, "needs " + std::to_string(needed) + " KV blocks, the decode pool has only " +
                                     std::to_string(pool_->num_blocks()));
    if (pool_->num_free_blocks() < needed) {
      send_message(socket_, {{"type", "full"}, {"req", req},
                             {"reason", "decode worker has " + std::to_string(pool_->num_free_blocks()) +
                                            " free KV blocks, the request needs " + std::to_string(needed)}});
      return;
    }
    DecodeRequest r;
    r.blocks = pool_->get_new_blocks(needed);
    r.num_prompt_tokens = n;
    r.max_tokens = max_tokens;
    r.deadline = now_seconds() + c_.kv_timeout;
    send_message(socket_, {{"type", "allocated"}, {"req", req},
                           {"blocks", std::vector<std::int32_t>(r.blocks.begin(), r.blocks.begin() + (n + c_.block_size - 1) / c_.block_size)}});
    decode_.emplace(req, std::move(r));
  }

  void take_kv(const Message& m, bool ready) {
    const std::int64_t req = field_int(m, "req", 0, std::numeric_limits<std::int64_t>::max());
    const auto it = decode_.find(req);
    if (it == decode_.end()) return;  // freed already (timeout or abort)
    DecodeRequest& r = it->second;
    try {
      const bool local = field_int(m, "prefill_worker", 0, std::numeric_limits<int>::max()) == self_id_;
      if (!local) receive_kv(m, ready, r, req);
      if (!ready) return;
      r.accounting = m.value("accounting", Message::object());
      if (c_.mode == TransferMode::READ && !local) {
        const double seconds = r.read_seconds;
        r.accounting["transfer_ms"] = seconds * 1e3;
        r.accounting["gb_per_s"] = static_cast<double>(r.accounting.value("bytes", 0.0)) / seconds / 1e9;
        r.accounting["transfer_over_prefill"] = seconds * 1e3 / r.accounting.value("prefill_ms", 1.0);
      }
      const std::string dst = hex64(kv_checksum(*cache_, r.blocks, r.num_prompt_tokens));
      r.accounting["dst_checksum"] = dst;
      check(dst == r.accounting.value("src_checksum", std::string()), "KV checksum mismatch after the transfer (source ",
            r.accounting.value("src_checksum", std::string("missing")), ", destination ", dst, ")");
      r.tokens.assign(1, static_cast<std::int32_t>(field_int(m, "first_token", 0, model_->config().vocab_size - 1)));
      r.num_computed = r.num_prompt_tokens;
      r.running = true;
      running_.push_back(req);
      if (r.max_tokens == 1) finish(req);
    } catch (const Error& e) {
      report_failure(req, e.what());
      drop(req);
    }
  }

  // The KV of request @p req from another worker: SEND posts the receives (at KV_SENDING), READ
  // gets it (at KV_READY, timed into r.read_seconds); WRITE has put it in place already.
  void receive_kv(const Message& m, bool ready, DecodeRequest& r, std::int64_t req) {
    const Peer& prefill = peer(m, "prefill_worker");
    const std::vector<std::int32_t> src = field_ids(m, "src_blocks", prefill.layout.num_blocks - 1);
    const TransferPlan plan = plan_transfer(layout_, r.blocks, prefill.layout, src, r.num_prompt_tokens, 0, layout_.num_layers);
    const TransferOptions options{.timeout_seconds = c_.kv_timeout, .pace_bytes_per_second = pace_};
    if (!ready) {  // SEND: post the receives the prefill worker's sends are waiting for
      transport_.recv(send_tag(req), plan.descriptors, options);
      r.received = true;
    } else if (c_.mode == TransferMode::READ) {
      const double t0 = now_seconds();
      transport_.read(prefill.handle, plan.descriptors, options);
      r.read_seconds = now_seconds() - t0;
      send_message(socket_, {{"type", "read_done"}, {"req", req}});
    }
  }

  // One batched step over every running request: each feeds its newest token.
  void decode_step() {
    Batch batch;
    for (std::int64_t req : running_) {
      const DecodeRequest& r = decode_.at(req);
      batch.add(r.blocks, r.num_computed, std::span(&r.tokens.back(), 1));
    }
    const std::vector<std::int32_t> next = model_->forward_greedy(batch, *cache_);
    const std::vector<std::int64_t> stepped = running_;
    for (std::size_t i = 0; i < stepped.size(); ++i) {
      DecodeRequest& r = decode_.at(stepped[i]);
      ++r.num_computed;
      r.tokens.push_back(next[i]);
      send_message(socket_, {{"type", "token"}, {"req", stepped[i]}, {"token", next[i]}});
      if (static_cast<int>(r.tokens.size()) >= r.max_tokens) finish(stepped[i]);
    }
  }

  void finish(std::int64_t req) {
    send_message(socket_, {{"type", "finished"}, {"req", req}, {"accounting", decode_.at(req).accounting}});
    ++served_;
    drop(req);
  }

  void drop(std::int64_t req) {
    const auto it = decode_.find(req);
    if (it == decode_.end()) return;
    pool_->free_blocks(it->second.blocks);
    std::erase(running_, req);
    decode_.erase(it);
  }

  void expire(double now) {
    std::vector<std::int64_t> late;
    for (const auto& [req, r] : decode_)
      if (!r.running && now > r.deadline) late.push_back(req);
    for (std::int64_t req : late) {
      report_failure(req, "no KV arrived within --kv-timeout " + std::to_string(c_.kv_timeout) + " s; blocks freed");
      drop(req);
    }
    for (auto it = held_.begin(); it != held_.end();) {
      if (now <= it->second.second) { ++it; continue; }
      std::cerr << "servelab worker (prefill): request " << it->first << " never confirmed its read; blocks freed\n";
      pool_->free_blocks(it->second.first);
      it = held_.erase(it);
    }
  }

  WorkerConfig c_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KVCache> cache_;
  std::unique_ptr<BlockPool> pool_;
  UcxTransport transport_;
  KVLayout layout_;
  std::string hash_;
  double pace_ = 0;
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::map<int, Peer> peers_;                       // by router-given worker id
  std::map<std::int64_t, DecodeRequest> decode_;    // decode role: requests holding blocks
  std::vector<std::int64_t> running_;               // decode role: KV arrived, decoding
  std::map<std::int64_t, std::pair<std::vector<std::int32_t>, double>> held_;  // prefill, READ: blocks and deadline
  std::deque<Message> pending_;                     // prefill role: prompts not started yet
  long served_ = 0;
  int self_id_ = -1;                                // the router's id for this worker
};

}  // namespace

std::string model_hash(const std::string& preset_name, const std::string& model_dir, std::uint64_t weights_seed) {
  std::string identity;
  if (model_dir.empty()) {
    identity = "preset:" + preset_name + ":seed:" + std::to_string(weights_seed);
  } else {
    std::ifstream in(std::filesystem::path(model_dir) / "config.json");
    check(in.good(), "--model ", model_dir, ": cannot read config.json");
    identity.assign(std::istreambuf_iterator<char>(in), {});
  }
  return hex64(fnv1a(identity));
}

WorkerSummary run_worker(const WorkerConfig& config) {
  Worker worker(config);
  return worker.serve();
}

}  // namespace servelab::disagg
