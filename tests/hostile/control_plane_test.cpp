// SPDX-License-Identifier: MIT
// The control plane against hostile and careless peers: a router (and workers where the attack
// needs them) as real `servelab` processes on 127.0.0.1, and a raw ZeroMQ peer or a raw TCP socket
// sending what no well-behaved peer sends. Each attack is bounded in count and time; each test checks
// that every process lives on, that what was refused was counted, and that honest requests still get
// their tokens.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "config/model_config.h"
#include "core/timer.h"
#include "disagg/client.h"
#include "disagg/control.h"
#include "disagg/process.h"
#include "disagg/ucx_transport.h"
#include "disagg/worker.h"

namespace servelab::disagg {
namespace {

constexpr double kStartTimeout = 10, kRequestTimeout = 20, kExitTimeout = 10;
const std::string kKey = "0123456789abcdef0123456789abcdef";

// A scratch folder with the cluster key in it, removed at the end.
struct Scratch {
  Scratch() {
    dir = std::filesystem::temp_directory_path() /
          ("servelab-hostile-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "key") << kKey << "\n";
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  // What a process started with its stderr in @p name wrote there.
  std::string text(const std::string& name) const {
    std::ifstream in(path(name));
    return {std::istreambuf_iterator<char>(in), {}};
  }
  std::filesystem::path dir;
  static inline int counter = 0;
};

// `servelab ARGS...` with its stderr (and so stdout) in file @p log.
std::unique_ptr<ChildProcess> start(const std::vector<std::string>& args, const std::string& log,
                                    const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::string command = "exec '" SERVELAB_EXE "'";
  for (const std::string& a : args) command += " '" + a + "'";
  command += " 2>'" + log + "'";
  return std::make_unique<ChildProcess>(std::vector<std::string>{"/bin/sh", "-c", command}, env);
}

// What a test's worker differs in.
struct WorkerSpec {
  std::string role;
  int block_size = 4;               // --block-size
  std::string tls = "tcp";          // UCX_TLS
  std::string preset = "tiny";      // --preset
  int blocks = 64;                  // --num-blocks
  std::vector<std::string> more{};  // further flags
};

// A router, keyed or not, and the workers a test starts, all on 127.0.0.1.
struct Fleet {
  explicit Fleet(bool with_key, double worker_timeout = 2, double request_timeout = 5) : keyed(with_key) {
    std::vector<std::string> args{"router",
                                  "--endpoint-file",
                                  scratch.path("endpoint"),
                                  "--worker-timeout",
                                  std::to_string(worker_timeout),
                                  "--request-timeout",
                                  std::to_string(request_timeout)};
    if (keyed) args.insert(args.end(), {"--cluster-key-file", scratch.path("key")});
    router = start(args, scratch.path("router.log"));
    endpoint = wait_for_endpoint_file(scratch.path("endpoint"), kStartTimeout);
  }
  // A worker as @p spec says; its log is "<name>.log".
  ChildProcess& worker(const std::string& name, const WorkerSpec& spec) {
    std::vector<std::string> args{"worker",
                                  "--role",
                                  spec.role,
                                  "--router",
                                  endpoint,
                                  "--preset",
                                  spec.preset,
                                  "--threads",
                                  "1",
                                  "--deterministic",
                                  "--block-size",
                                  std::to_string(spec.block_size),
                                  "--num-blocks",
                                  std::to_string(spec.blocks)};
    if (keyed) args.insert(args.end(), {"--cluster-key-file", scratch.path("key")});
    args.insert(args.end(), spec.more.begin(), spec.more.end());
    workers.push_back(start(args, scratch.path(name + ".log"), {{"UCX_TLS", spec.tls}, {"UCX_NET_DEVICES", "lo"}}));
    return *workers.back();
  }
  std::string key() const { return keyed ? kKey : ""; }
  // One prefill and one decode worker, registered.
  void start_pair() {
    worker("prefill", {.role = "prefill"});
    worker("decode", {.role = "decode"});
    wait_for_workers(endpoint, 1, 1, kStartTimeout, key());
  }

  Scratch scratch;
  bool keyed;
  std::unique_ptr<ChildProcess> router;
  std::string endpoint;
  std::vector<std::unique_ptr<ChildProcess>> workers;
};

// A raw DEALER on the router: sends any bytes, reads any answer.
struct RawPeer {
  explicit RawPeer(const std::string& endpoint) : socket(connect_dealer(context, endpoint)) {}
  void send_bytes(const std::string& bytes) { socket.send(zmq::buffer(bytes), zmq::send_flags::none); }
  void send(Message m, const std::string& key = "") {
    if (!key.empty()) m["key"] = key;
    send_message(socket, m);
  }
  // The next answer of type @p type within @p seconds, skipping others; null when none came.
  Message expect(const std::string& type, double seconds = 5) {
    const double deadline = now_seconds() + seconds;
    while (now_seconds() < deadline)
      if (const auto m = receive_message(socket, 50); m && (*m)["type"] == type) return *m;
    return nullptr;
  }
  // The router's status answer (workers by role, malformed_messages); null when it did not answer.
  Message status(const std::string& key = "") {
    send({{"type", "status"}}, key);
    return expect("status");
  }
  zmq::context_t context;
  zmq::socket_t socket;
};

long malformed(RawPeer& peer, const std::string& key = "") {
  const Message s = peer.status(key);
  REQUIRE(s.is_object());
  return s["malformed_messages"].get<long>();
}

int port_of(const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); }

// Bytes straight onto the router's TCP port, as a port scanner or a misdirected HTTP client sends them.
void send_raw_tcp(const std::string& endpoint, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port_of(endpoint)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  (void)::write(fd, bytes.data(), bytes.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::close(fd);
}

ClientRequest request(int prompt_len, int max_tokens) {
  ClientRequest r;
  for (int i = 0; i < prompt_len; ++i) r.prompt.push_back((i * 37 + 11) % 500);
  r.max_tokens = max_tokens;
  return r;
}

// Shuts the fleet down; true when every worker then exits 0 (no KV block held).
bool stop_clean(Fleet& fleet) {
  shutdown_router(fleet.endpoint, fleet.key());
  bool clean = true;
  for (auto& w : fleet.workers) clean = clean && w->wait_for(kExitTimeout) == std::optional<int>(0);
  return clean && fleet.router->wait_for(kExitTimeout) == std::optional<int>(0);
}

// After an attack: a keyed fleet still serves one honest request whole, then shuts down clean.
void serves_then_stops_clean(Fleet& fleet) {
  const std::vector<ClientRequest> one{request(9, 4)};
  const ClientResult r = run_client(fleet.endpoint, one, kRequestTimeout, kKey)[0];
  CHECK(r.error.empty());
  CHECK(r.tokens.size() == 4);
  CHECK(stop_clean(fleet));
}

TEST_CASE("the router outlives raw bytes, non-JSON frames, untyped messages and worker replies from a client",
          "[hostile]") {
  Fleet fleet(false);
  send_raw_tcp(fleet.endpoint, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  send_raw_tcp(fleet.endpoint, std::string("\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f garbage", 18));
  RawPeer peer(fleet.endpoint);
  peer.send_bytes("not json at all");
  peer.send_bytes("");
  peer.send_bytes("[1, 2, 3]");
  peer.send({{"no_type", 1}});
  peer.send({{"type", 7}});
  peer.send({{"type", "kv_ready"}, {"req", 0}, {"first_token", 1}, {"src_blocks", {0}}});
  peer.send({{"type", "token"}, {"req", 0}, {"token", 1}});
  peer.send({{"type", "allocated"}, {"req", 0}, {"blocks", {0}}});
  peer.send({{"type", "no_such_type"}});
  // A submit without a prompt: the client hears why, naming the field.
  peer.send({{"type", "submit"}, {"client_req", 3}, {"max_tokens", 2}});
  const Message failed = peer.expect("failed");
  REQUIRE(failed.is_object());
  CHECK(failed["req"] == 3);
  CHECK_THAT(failed["reason"].get<std::string>(), Catch::Contains("'prompt'"));
  CHECK(malformed(peer) == 10);
  CHECK_FALSE(fleet.router->wait_for(0).has_value());
}

TEST_CASE("a submit with an empty prompt is answered at once, with the field named", "[hostile]") {
  Fleet fleet(false);
  RawPeer peer(fleet.endpoint);
  peer.send({{"type", "submit"}, {"client_req", 0}, {"prompt", Message::array()}, {"max_tokens", 4}});
  const Message failed = peer.expect("failed", 2);
  REQUIRE(failed.is_object());
  CHECK_THAT(failed["reason"].get<std::string>(), Catch::Contains("'prompt'") && Catch::Contains("empty"));
  CHECK(malformed(peer) == 1);
}

TEST_CASE("with a cluster key, a peer without it can neither register, submit nor shut the router down", "[hostile]") {
  Fleet fleet(true);
  RawPeer peer(fleet.endpoint);
  peer.send({{"type", "shutdown"}});
  peer.send({{"type", "shutdown"}}, "wrong-key-wrong-key-wrong-key");
  peer.send({{"type", "submit"}, {"client_req", 0}, {"prompt", {1, 2}}, {"max_tokens", 1}});
  const Message unkeyed = peer.expect("failed");
  REQUIRE(unkeyed.is_object());
  CHECK_THAT(unkeyed["reason"].get<std::string>(), Catch::Contains("cluster key"));
  RawPeer rogue(fleet.endpoint);
  rogue.send(
      {{"type", "register"},
       {"role", "decode"},
       {"transport", {{"address", "00"}, {"regions", Message::array()}}},
       {"kv_layout", {{"num_layers", 2}, {"num_blocks", 64}, {"block_size", 4}, {"kv_dim", 32}, {"dtype_bytes", 4}}},
       {"model_hash", "x"},
       {"ucx_tls", "tcp"}});
  const Message refused = rogue.expect("refused");
  REQUIRE(refused.is_object());
  CHECK_THAT(refused["reason"].get<std::string>(), Catch::Contains("cluster key"));
  CHECK_FALSE(fleet.router->wait_for(0.3).has_value());  // the shutdowns did nothing
  const Message status = peer.status(kKey);
  REQUIRE(status.is_object());
  CHECK(status["workers"]["decode"] == 0);
  CHECK(status["malformed_messages"] == 4);
}

TEST_CASE("a registration without kv_layout is refused, never relayed: the prefill worker lives and serves",
          "[hostile]") {
  Fleet fleet(true);
  fleet.worker("prefill", {.role = "prefill"});
  wait_for_workers(fleet.endpoint, 1, 0, kStartTimeout, kKey);
  RawPeer rogue(fleet.endpoint);
  rogue.send({{"type", "register"},
              {"role", "decode"},
              {"transport", {{"address", "00"}, {"regions", Message::array()}}},
              {"model_hash", "x"},
              {"ucx_tls", "tcp"}},
             kKey);
  const Message refused = rogue.expect("refused");
  REQUIRE(refused.is_object());
  CHECK_THAT(refused["reason"].get<std::string>(), Catch::Contains("kv_layout"));
  fleet.worker("decode", {.role = "decode"});
  wait_for_workers(fleet.endpoint, 1, 1, kStartTimeout, kKey);
  serves_then_stops_clean(fleet);
}

TEST_CASE("forged full, kv_ready, allocated, token and finished for requests being decoded change nothing",
          "[hostile]") {
  Fleet fleet(true);
  fleet.start_pair();
  const std::vector<ClientRequest> rs{request(5, 24), request(9, 24), request(17, 24)};
  const std::vector<ClientResult> clean = run_client(fleet.endpoint, rs, kRequestTimeout, kKey);
  for (const ClientResult& r : clean) REQUIRE(r.error.empty());
  // Request ids 3..5 are the next run's: the forger sends for them (and their neighbours) while they decode.
  std::atomic<bool> done{false};
  std::thread forger([&] {
    RawPeer peer(fleet.endpoint);
    for (int round = 0; round < 400 && !done; ++round) {
      for (int req = 2; req < 7; ++req) {
        peer.send({{"type", "full"}, {"req", req}, {"reason", "forged"}}, kKey);
        peer.send({{"type", "kv_ready"}, {"req", req}, {"first_token", 1}, {"src_blocks", {0, 1}}}, kKey);
        peer.send({{"type", "allocated"}, {"req", req}, {"blocks", {0, 1}}}, kKey);
        peer.send({{"type", "token"}, {"req", req}, {"token", 7}}, kKey);
        peer.send({{"type", "finished"}, {"req", req}}, kKey);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const std::vector<ClientResult> attacked = run_client(fleet.endpoint, rs, kRequestTimeout, kKey);
  done = true;
  forger.join();
  for (std::size_t i = 0; i < rs.size(); ++i) {
    CHECK(attacked[i].error.empty());
    CHECK(attacked[i].tokens == clean[i].tokens);
  }
  RawPeer peer(fleet.endpoint);
  CHECK(malformed(peer, kKey) >= 25);
  CHECK(stop_clean(fleet));  // both workers exit 0: no block was taken for a forged message
}

// A registration as a Fleet's workers send it (the tiny preset, 4-token blocks, f32 over UCX's tcp),
// for role @p role with @p transport, keyed: only the transport can be wrong in it.
Message registration(const std::string& role, const Message& transport) {
  const ModelConfig tiny = preset("tiny");
  return {{"type", "register"},
          {"role", role},
          {"transport", transport},
          {"kv_layout",
           {{"num_layers", tiny.num_hidden_layers},
            {"num_blocks", 64},
            {"block_size", 4},
            {"kv_dim", tiny.num_key_value_heads * tiny.head_dim},
            {"dtype_bytes", 4}}},
          {"model_hash", model_hash(cli::ModelFlags{})},
          {"ucx_tls", "tcp"}};
}

TEST_CASE("a keyed peer registering a UCX address that UCX cannot unpack is refused with UCX's reason", "[hostile]") {
  Fleet fleet(true);
  fleet.start_pair();
  // Address version 11 (UCX 1.13 knows 1 and 2): unpacking it ends a process in an assertion (SIGABRT).
  RawPeer rogue(fleet.endpoint);
  rogue.send(registration("decode", {{"address", "0b" + std::string(80, 'f')}, {"regions", Message::array()}}), kKey);
  REQUIRE(rogue.expect("registered").is_object());  // the router cannot judge a UCX address; the prefill worker can
  const Message refused = rogue.expect("refused");
  INFO("prefill log: " << fleet.scratch.text("prefill.log") << "\nrouter log: " << fleet.scratch.text("router.log"));
  REQUIRE(refused.is_object());
  CHECK_THAT(refused["reason"].get<std::string>(),
             Catch::Contains("prefill worker") && Catch::Contains("transport") && Catch::Contains("child process"));
  // The worker logs UCX's line as it refuses; the refusal can reach us before the log reaches its file.
  std::string log;
  for (int i = 0; i < 100; ++i) {
    log = fleet.scratch.text("prefill.log");
    if (log.find("Assertion") != std::string::npos || log.find("UCX") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK_THAT(log, Catch::Contains("Assertion") || Catch::Contains("UCX"));
  RawPeer peer(fleet.endpoint);
  const Message status = peer.status(kKey);
  REQUIRE(status.is_object());
  CHECK(status["workers"]["decode"] == 1);  // the rogue is gone, the honest decode worker serves
  for (auto& w : fleet.workers) CHECK_FALSE(w->wait_for(0).has_value());
  serves_then_stops_clean(fleet);
}

// Once by default; for SERVELAB_STORM_SECONDS when set (the storm label's 60 s), client rounds back to back.
TEST_CASE("a registered worker's replies about requests it does not own, or that do not exist, change nothing",
          "[hostile][storm]") {
  const char* env = std::getenv("SERVELAB_STORM_SECONDS");
  const double storm_until = now_seconds() + (env ? std::stod(env) : 0);
  Fleet fleet(true);
  fleet.start_pair();
  const std::vector<ClientRequest> rs{request(5, 24), request(9, 24), request(17, 24)};
  const std::vector<ClientResult> clean = run_client(fleet.endpoint, rs, kRequestTimeout, kKey);
  for (const ClientResult& r : clean) REQUIRE(r.error.empty());

  // The forger is a worker in good standing: keyed, a real UCX address (the prefill worker connects to it), a
  // peer_added for the prefill worker it is told of, and heartbeats. As a decode worker linked to the prefill
  // worker it is handed allocs, which it answers as a full worker does.
  ::setenv("UCX_TLS", "tcp", 1);
  ::setenv("UCX_NET_DEVICES", "lo", 1);
  UcxTransport transport;
  RawPeer forger(fleet.endpoint);
  forger.send(registration("decode", to_json(transport.local_info())), kKey);
  const Message registered = forger.expect("registered");
  REQUIRE(registered.is_object());
  std::atomic<bool> done{false};
  std::thread beats([&] {
    RawPeer beat(fleet.endpoint);
    while (!done) {
      beat.send({{"type", "heartbeat"}, {"worker_id", registered["worker_id"]}, {"session", registered["session"]}},
                kKey);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  long forged = 0;
  std::thread forging([&] {
    std::int64_t newest = static_cast<std::int64_t>(rs.size());  // router ids seen so far, from the allocs
    while (!done) {
      while (const auto m = receive_message(forger.socket, 0))
        if ((*m)["type"] == "alloc") {
          newest = std::max(newest, (*m)["req"].get<std::int64_t>());
          forger.send({{"type", "full"}, {"req", (*m)["req"]}, {"reason", "no free blocks"}}, kKey);
        } else if ((*m)["type"] == "peer") {
          forger.send({{"type", "peer_added"}, {"worker_id", (*m)["worker_id"]}}, kKey);
        }
      // Another worker's requests (ended, in flight, about to come), in every stage's replies but the ones a
      // decode worker gives while it allocates: those this worker may give for a request handed to it.
      for (std::int64_t req = std::max<std::int64_t>(0, newest - 8); req <= newest + 2; ++req) {
        forger.send({{"type", "token"}, {"req", req}, {"token", 7}}, kKey);
        forger.send({{"type", "finished"}, {"req", req}}, kKey);
        forger.send({{"type", "kv_ready"}, {"req", req}, {"first_token", 1}, {"src_blocks", {0}}}, kKey);
        forger.send({{"type", "kv_sending"}, {"req", req}, {"src_blocks", {0}}}, kKey);
        forger.send({{"type", "read_done"}, {"req", req}}, kKey);
        forged += 5;
      }
      // Requests that never were, in every reply a worker may send.
      const std::int64_t none = 1'000'000 + forged;
      forger.send({{"type", "allocated"}, {"req", none}, {"blocks", {0}}}, kKey);
      forger.send({{"type", "full"}, {"req", none}, {"reason", "forged"}}, kKey);
      forger.send({{"type", "failed"}, {"req", none}, {"reason", "forged"}}, kKey);
      forger.send({{"type", "token"}, {"req", none}, {"token", 7}}, kKey);
      forger.send({{"type", "peer_added"}, {"worker_id", 1'000'000}}, kKey);  // and a worker that never was
      forged += 5;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  long rounds = 0, differed = 0;
  do {
    const std::vector<ClientResult> attacked = run_client(fleet.endpoint, rs, kRequestTimeout, kKey);
    ++rounds;
    for (std::size_t i = 0; i < rs.size(); ++i) {
      INFO("round " << rounds << ", request " << i << ": " << attacked[i].error);
      CHECK(attacked[i].error.empty());
      differed += attacked[i].tokens != clean[i].tokens;
    }
  } while (now_seconds() < storm_until);
  done = true;
  forging.join();
  beats.join();
  CHECK(differed == 0);
  // Every forged message is counted, and nothing else was: the router may still be reading the last ones.
  RawPeer peer(fleet.endpoint);
  long counted = 0;
  for (int i = 0; i < 50 && (counted = malformed(peer, kKey)) < forged; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(counted == forged);
  WARN(rounds << " rounds of " << rs.size() << " requests beside " << forged << " forged replies, " << counted
              << " counted as malformed; " << differed << " requests differed from the quiet run");
  CHECK(stop_clean(fleet));  // both workers exit 0: no block was taken for a forged message
}

TEST_CASE("a prefill longer than --worker-timeout does not get the busy worker evicted", "[hostile]") {
  Fleet fleet(false, 0.25, 30);
  const std::vector<std::string> budget{"--max-num-batched-tokens", "4096", "--kv-timeout", "30"};
  fleet.worker("prefill", {.role = "prefill", .preset = "small", .blocks = 1024, .more = budget});
  fleet.worker("decode", {.role = "decode", .preset = "small", .blocks = 1024, .more = budget});
  wait_for_workers(fleet.endpoint, 1, 1, kStartTimeout);
  const std::vector<ClientRequest> one{request(600, 2)};
  const ClientResult r = run_client(fleet.endpoint, one, kRequestTimeout)[0];
  INFO("error: " << r.error << "\naccounting: " << r.accounting.dump()
                 << "\nrouter: " << fleet.scratch.text("router.log"));
  CHECK(r.error.empty());
  CHECK(r.tokens.size() == 2);
  // The attack is a forward pass longer than --worker-timeout; a machine too fast for it is said so.
  if (r.accounting.value("prefill_ms", 0.0) <= 250)
    WARN("the prefill took " << r.accounting.value("prefill_ms", 0.0) << " ms, within --worker-timeout 0.25 s");
  CHECK_THAT(fleet.scratch.text("router.log"), !Catch::Contains("evicted"));
  CHECK(stop_clean(fleet));
}

TEST_CASE("workers whose KV block sizes or UCX transports differ are refused at registration, naming both",
          "[hostile]") {
  Fleet fleet(false);
  fleet.worker("prefill", {.role = "prefill"});
  wait_for_workers(fleet.endpoint, 1, 0, kStartTimeout);
  SECTION("block size") {
    ChildProcess& decode = fleet.worker("decode", {.role = "decode", .block_size = 8});
    REQUIRE(decode.wait_for(kStartTimeout) == std::optional<int>(1));
    const std::string log = fleet.scratch.text("decode.log");
    CHECK_THAT(log, Catch::Contains("--block-size") && Catch::Contains("8") && Catch::Contains("4"));
  }
  SECTION("UCX transports") {
    ChildProcess& decode = fleet.worker("decode", {.role = "decode", .tls = "sm"});
    REQUIRE(decode.wait_for(kStartTimeout) == std::optional<int>(1));
    const std::string log = fleet.scratch.text("decode.log");
    CHECK_THAT(log, Catch::Contains("UCX_TLS") && Catch::Contains("'sm'") && Catch::Contains("'tcp'"));
  }
  RawPeer peer(fleet.endpoint);
  const Message status = peer.status();
  REQUIRE(status.is_object());
  CHECK(status["workers"]["decode"] == 0);
}

TEST_CASE("worker --router-file holding garbage names the flag and the file", "[hostile]") {
  Scratch scratch;
  std::ofstream(scratch.path("router")) << "garbage\n";
  auto worker = start({"worker", "--role", "prefill", "--router-file", scratch.path("router"), "--preset", "tiny",
                       "--router-timeout", "1"},
                      scratch.path("worker.log"));
  REQUIRE(worker->wait_for(kStartTimeout) == std::optional<int>(1));
  const std::string log = scratch.text("worker.log");
  CHECK_THAT(log, Catch::Contains("--router-file") && Catch::Contains(scratch.path("router")) &&
                      Catch::Contains("garbage") && Catch::Contains("tcp://"));
}

}  // namespace
}  // namespace servelab::disagg
