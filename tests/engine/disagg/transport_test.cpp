// SPDX-License-Identifier: MIT
// The KV data plane (engine/disagg/): descriptor plans and UCX transfers between
// two processes, over TCP and over shared memory, in all three modes.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/error.h"
#include "core/hash.h"
#include "disagg/kv_transfer_plan.h"
#include "disagg/ucx_transport.h"
#include "kv/kv_cache.h"

namespace servelab::disagg {
namespace {

TEST_CASE("contiguous runs of (layer, block) merge into one descriptor", "[disagg]") {
  // 2 layers, block_size 4, 2 floats a row (8 bytes); 14 tokens fill blocks 0..3, the last one half.
  const KVLayout src{.num_layers = 2, .num_blocks = 10, .block_size = 4, .kv_dim = 2};
  const KVLayout dst{.num_layers = 2, .num_blocks = 6, .block_size = 4, .kv_dim = 2};
  const std::vector<std::int32_t> src_blocks{4, 5, 6, 9}, dst_blocks{0, 1, 2, 3};
  const TransferPlan plan = plan_transfer(src, src_blocks, dst, dst_blocks, 14, 0, 2);
  // per (layer, K/V): run [4,5,6 -> 0,1,2] (12 tokens) and run [9 -> 3] (2 tokens)
  REQUIRE(plan.descriptors.size() == 2 * 2 * 2);
  CHECK(plan.num_uncoalesced == 2 * 2 * 4);
  CHECK(plan.bytes == 2ull * 2 * 14 * 2 * 4);             // 2 (K,V) * layers * tokens * kv_dim * 4 bytes
  const TransferDescriptor& first = plan.descriptors[0];  // layer 0, K, blocks 4..6
  CHECK(first.local_region == 0);
  CHECK(first.local_offset == 4 * 4 * 8);
  CHECK(first.remote_offset == 0);
  CHECK(first.length == 12 * 8);
  const TransferDescriptor& layer1_v_tail = plan.descriptors[7];  // layer 1, V, block 9 -> 3
  CHECK(layer1_v_tail.local_region == 1);
  CHECK(layer1_v_tail.local_offset == ((1 * 10 + 9) * 4) * 8);
  CHECK(layer1_v_tail.remote_offset == ((1 * 6 + 3) * 4) * 8);
  CHECK(layer1_v_tail.length == 2 * 8);
}

TEST_CASE("a transfer plan refuses layouts and tables that do not fit", "[disagg]") {
  const KVLayout a{.num_layers = 2, .num_blocks = 4, .block_size = 4, .kv_dim = 2};
  KVLayout b = a;
  b.kv_dim = 4;
  const std::vector<std::int32_t> two{0, 1};
  CHECK_THROWS_WITH(plan_transfer(a, two, b, two, 8, 0, 2), Catch::Contains("KV layouts differ"));
  CHECK_THROWS_WITH(plan_transfer(a, two, a, two, 9, 0, 2), Catch::Contains("9 tokens need 3"));
  const std::vector<std::int32_t> outside{0, 7};
  CHECK_THROWS_WITH(plan_transfer(a, two, a, outside, 8, 0, 2), Catch::Contains("block id 7 is outside [0, 4)"));
}

// --- two processes -------------------------------------------------------------------------

constexpr std::uint64_t kDataTag = 1ull << 32, kDoneTag = 2ull << 32;
constexpr std::size_t kBufferBytes = 3 << 20;
constexpr double kTimeout = 10;  // generous: two sanitizer-built processes on a loaded 2-core machine

std::byte pattern(std::size_t i, unsigned seed) {
  return static_cast<std::byte>((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

void write_all(int fd, const std::string& s) {
  const std::uint64_t n = s.size();
  REQUIRE(::write(fd, &n, sizeof n) == sizeof n);
  REQUIRE(::write(fd, s.data(), n) == static_cast<ssize_t>(n));
}
std::string read_all(int fd) {
  std::uint64_t n = 0;
  REQUIRE(::read(fd, &n, sizeof n) == sizeof n);
  std::string s(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, s.data() + got, n - got);
    REQUIRE(r > 0);
    got += static_cast<std::size_t>(r);
  }
  return s;
}
std::string encode(const TransportInfo& info) {
  std::ostringstream out;
  out << info.address;
  for (const RemoteRegion& r : info.regions) out << ' ' << r.base << ' ' << r.length << ' ' << r.rkey;
  return out.str();
}
TransportInfo decode(const std::string& s) {
  std::istringstream in(s);
  TransportInfo info;
  in >> info.address;
  RemoteRegion r;
  while (in >> r.base >> r.length >> r.rkey) info.regions.push_back(r);
  return info;
}

// Descriptors with gaps, different local and remote offsets, and one longer than a UCX piece.
std::vector<TransferDescriptor> descriptors() {
  return {{.local_region = 0, .local_offset = 0, .remote_region = 0, .remote_offset = 4096, .length = 1000},
          {.local_region = 0, .local_offset = 65536, .remote_region = 0, .remote_offset = 8192, .length = 1 << 20},
          {.local_region = 0, .local_offset = 2 << 20, .remote_region = 0, .remote_offset = 2 << 20, .length = 300000}};
}
// Swaps local and remote: what the peer posts for the same transfer.
std::vector<TransferDescriptor> mirrored(std::vector<TransferDescriptor> d) {
  for (TransferDescriptor& x : d) {
    std::swap(x.local_region, x.remote_region);
    std::swap(x.local_offset, x.remote_offset);
  }
  return d;
}
std::uint64_t hash_of(const std::vector<std::byte>& b) {
  return fnv1a({reinterpret_cast<const char*>(b.data()), b.size()});
}

// The peer: registers a buffer (seed 2 pattern, or zeros when it receives), publishes its
// info, serves the transfer, and reports the hash of its buffer once the parent says done.
[[noreturn]] void run_peer(TransferMode mode, int to_parent, int from_parent) {
  int code = 0;
  try {
    UcxTransport t;
    std::vector<std::byte> buffer(kBufferBytes);
    if (mode == TransferMode::READ)
      for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = pattern(i, 2);
    std::vector<std::byte> done(8);
    t.register_memory(buffer.data(), buffer.size());
    t.register_memory(done.data(), done.size());
    write_all(to_parent, encode(t.local_info()));
    const int parent = t.add_peer(decode(read_all(from_parent)));
    (void)parent;
    const TransferOptions options{.timeout_seconds = kTimeout};
    if (mode == TransferMode::SEND) t.recv(kDataTag, mirrored(descriptors()), options);
    t.recv(kDoneTag, std::vector<TransferDescriptor>{{.local_region = 1, .length = 8}}, options);
    write_all(to_parent, std::to_string(hash_of(buffer)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peer: %s\n", e.what());
    code = 1;
  }
  std::_Exit(code);
}

// Kills and reaps the peer if the test ends early, so that a failure never leaves a process behind.
struct ChildGuard {
  pid_t pid;
  ~ChildGuard() {
    if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

void transfer_between_processes(TransferMode mode, const char* tls) {
  ::setenv("UCX_TLS", tls, 1);
  ::setenv("UCX_NET_DEVICES", std::strcmp(tls, "tcp") == 0 ? "lo" : "all", 1);
  int up[2], down[2];
  REQUIRE(::pipe(up) == 0);
  REQUIRE(::pipe(down) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(up[0]);
    ::close(down[1]);
    run_peer(mode, up[1], down[0]);
  }
  ChildGuard guard{pid};
  ::close(up[1]);
  ::close(down[0]);
  std::string peer_hash;
  std::vector<std::byte> buffer(kBufferBytes), expected_peer(kBufferBytes);
  {
    UcxTransport t;
    for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = pattern(i, 1);
    std::vector<std::byte> done(8);
    t.register_memory(buffer.data(), buffer.size());
    t.register_memory(done.data(), done.size());
    const int peer = t.add_peer(decode(read_all(up[0])));
    write_all(down[1], encode(t.local_info()));
    const TransferOptions options{.timeout_seconds = kTimeout};
    const std::vector<TransferDescriptor> d = descriptors();
    if (mode == TransferMode::WRITE) t.write(peer, d, options);
    if (mode == TransferMode::READ) t.read(peer, d, options);
    if (mode == TransferMode::SEND) t.send(peer, kDataTag, d, options);
    t.send(peer, kDoneTag, std::vector<TransferDescriptor>{{.local_region = 1, .length = 8}}, options);
    peer_hash = read_all(up[0]);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  guard.pid = 0;
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  ::close(up[0]);
  ::close(down[1]);
  // What each buffer must hold now: the reader's pattern where the descriptors point, its own elsewhere.
  if (mode == TransferMode::READ) {
    std::vector<std::byte> want(kBufferBytes);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = pattern(i, 1);
    for (const TransferDescriptor& x : descriptors())
      for (std::uint64_t i = 0; i < x.length; ++i) want[x.local_offset + i] = pattern(x.remote_offset + i, 2);
    CHECK(hash_of(buffer) == hash_of(want));
  } else {
    for (const TransferDescriptor& x : descriptors())
      std::memcpy(expected_peer.data() + x.remote_offset, buffer.data() + x.local_offset, x.length);
    CHECK(peer_hash == std::to_string(hash_of(expected_peer)));
  }
}

TEST_CASE("write, read and send move exactly the described bytes between processes", "[disagg]") {
  const char* tls = GENERATE("tcp", "sm");
  const TransferMode mode = GENERATE(TransferMode::WRITE, TransferMode::READ, TransferMode::SEND);
  INFO("UCX_TLS=" << tls << " mode " << to_string(mode));
  transfer_between_processes(mode, tls);
}

TEST_CASE("a receive nobody sends to times out with an error instead of hanging", "[disagg]") {
  ::setenv("UCX_TLS", "sm", 1);
  UcxTransport t;
  std::vector<std::byte> buffer(64);
  t.register_memory(buffer.data(), buffer.size());
  const std::vector<TransferDescriptor> d{{.length = 64}};
  CHECK_THROWS_WITH(t.recv(kDataTag, d, {.timeout_seconds = 0.2}), Catch::Contains("receive timed out"));
  // Nothing is left pending: the same receive can be posted again.
  CHECK_THROWS_WITH(t.recv(kDataTag, d, {.timeout_seconds = 0.05}), Catch::Contains("timed out"));
}

TEST_CASE("a descriptor outside a registered region is refused before anything moves", "[disagg]") {
  UcxTransport t;
  std::vector<std::byte> buffer(64);
  t.register_memory(buffer.data(), buffer.size());
  const std::vector<TransferDescriptor> d{{.local_offset = 32, .length = 64}};
  CHECK_THROWS_WITH(t.recv(kDataTag, d, {}), Catch::Contains("outside region 0 of 64 bytes"));
}

}  // namespace
}  // namespace servelab::disagg
