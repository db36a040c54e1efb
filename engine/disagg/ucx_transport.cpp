// SPDX-License-Identifier: MIT
#include "disagg/ucx_transport.h"

#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <iostream>
#include <cstring>
#include <cstdlib>
#include <string>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/hex.h"
#include "core/timer.h"

namespace servelab::disagg {

namespace {

// Pieces a descriptor is cut into: pacing needs small steps to land within a few
// percent of bytes/rate, and SEND's receiver must cut its descriptors the same way.
constexpr std::uint64_t kMaxPieceBytes = 256 * 1024;

void ucs_check(ucs_status_t status, const char* what) {
  check(status == UCS_OK, "UCX ", what, ": ", ucs_status_string(status));
}

// One piece of a descriptor: offsets within the descriptor's local and remote spans.
struct Piece {
  std::uint64_t local_offset, remote_offset, length;
  int local_region, remote_region;
};

std::vector<Piece> cut(std::span<const TransferDescriptor> descriptors) {
  std::vector<Piece> pieces;
  for (const TransferDescriptor& d : descriptors)
    for (std::uint64_t at = 0; at < d.length; at += kMaxPieceBytes)
      pieces.push_back({d.local_offset + at, d.remote_offset + at, std::min(kMaxPieceBytes, d.length - at),
                        d.local_region, d.remote_region});
  return pieces;
}

// True when UCX_TLS names shared-memory transports alone (sm, posix, sysv, cma, ...). UCX 1.13's
// shared-memory transports cannot detect a dead peer: asked for peer error handling they refuse
// the endpoint and log an ERROR, so such a run asks for none and relies on the timeouts.
bool shared_memory_only(const char* tls) {
  if (tls == nullptr || *tls == '\0' || *tls == '^')
    return false;  // unset or an exclusion list: UCX may pick a network
  std::string list = tls;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, end - start);
    if (name != "sm" && name != "shm" && name != "posix" && name != "sysv" && name != "cma" && name != "knem" &&
        name != "xpmem" && name != "self")
      return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

constexpr EnumNames<TransferMode, 3> kTransferModes{
    {{{TransferMode::WRITE, "write"}, {TransferMode::READ, "read"}, {TransferMode::SEND, "send"}}}};

const char* to_string(TransferMode mode) { return kTransferModes.name(mode); }

TransferMode parse_transfer_mode(const std::string& text, const std::string& what) {
  return kTransferModes.parse(text, what);
}

struct UcxTransport::State {
  struct Region {
    ucp_mem_h memh = nullptr;
    std::byte* base = nullptr;
    std::size_t length = 0;
    std::string rkey;  // packed, hex
  };
  struct Peer {
    ucp_ep_h ep = nullptr;
    std::vector<ucp_rkey_h> rkeys;      // [peer regions]
    std::vector<RemoteRegion> regions;  // [peer regions]
    ucs_status_t error = UCS_OK;        // set by UCX's error callback when the peer failed
  };

  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  std::vector<Region> regions;
  std::map<int, Peer> peers;  // a map: the error callback keeps a Peer's address
  int next_peer = 0;

  Peer& peer(int id) {
    const auto it = peers.find(id);
    check(it != peers.end(), "kv transfer: unknown peer ", id);
    check(it->second.error == UCS_OK, "kv transfer: the peer failed (", ucs_status_string(it->second.error), ")");
    return it->second;
  }
  std::byte* local(int region, std::uint64_t offset, std::uint64_t length) {
    check(region >= 0 && static_cast<std::size_t>(region) < regions.size(), "kv transfer: unknown local region ",
          region);
    const Region& r = regions[static_cast<std::size_t>(region)];
    check(offset <= r.length && length <= r.length - offset, "kv transfer: local bytes [", offset, ", ",
          offset + length, ") outside region ", region, " of ", r.length, " bytes");
    return r.base + offset;
  }
  std::uint64_t remote(const Peer& p, int region, std::uint64_t offset, std::uint64_t length) {
    check(region >= 0 && static_cast<std::size_t>(region) < p.regions.size(), "kv transfer: unknown remote region ",
          region);
    const RemoteRegion& r = p.regions[static_cast<std::size_t>(region)];
    check(offset <= r.length && length <= r.length - offset, "kv transfer: remote bytes [", offset, ", ",
          offset + length, ") outside the peer's region ", region, " of ", r.length, " bytes");
    return r.base + offset;
  }

  // Gives up on requests still in flight: cancels what can be cancelled (receives) and
  // frees the handles; UCX releases each when it completes or its endpoint closes.
  void abandon(std::vector<void*>& pending) {
    for (void* r : pending)
      if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
        ucp_request_cancel(worker, r);
        ucp_request_free(r);
      }
    pending.clear();
  }
  // Keeps @p request if it is in flight; throws (after abandoning the rest) when posting failed.
  void track(std::vector<void*>& pending, ucs_status_ptr_t request, const char* what) {
    if (UCS_PTR_IS_ERR(request)) {
      abandon(pending);
      fail("kv transfer: ", what, " failed: ", ucs_status_string(UCS_PTR_STATUS(request)));
    }
    if (request != nullptr) pending.push_back(request);
  }
  // Spins until every pending request completes, or the deadline or an error ends the wait.
  void wait(std::vector<void*>& pending, double deadline, const char* what, const Peer* p) {
    while (!pending.empty()) {
      ucp_worker_progress(worker);
      for (auto it = pending.begin(); it != pending.end();) {
        const ucs_status_t s = ucp_request_check_status(*it);
        if (s == UCS_INPROGRESS) {
          ++it;
          continue;
        }
        ucp_request_free(*it);
        it = pending.erase(it);
        if (s != UCS_OK) {
          abandon(pending);
          fail("kv transfer: ", what, " failed: ", ucs_status_string(s));
        }
      }
      if (p != nullptr && p->error != UCS_OK) {
        abandon(pending);
        fail("kv transfer: ", what, " failed: the peer failed (", ucs_status_string(p->error), ")");
      }
      if (!pending.empty() && now_seconds() > deadline) {
        abandon(pending);
        fail("kv transfer: ", what, " timed out (the peer did not complete it in time)");
      }
    }
  }
  // Pacing: holds a piece back until (bytes before it) / rate after @p start; called once more
  // with every byte after the wait, the call then lasts no less than bytes / rate.
  void pace(double start, std::uint64_t bytes_so_far, double rate) {
    if (rate <= 0) return;
    const double due = start + static_cast<double>(bytes_so_far) / rate;
    // Spin, not sleep: the pieces already posted move only while the worker progresses.
    while (now_seconds() < due) ucp_worker_progress(worker);
  }
};

UcxTransport::UcxTransport() : s_(std::make_unique<State>()) {
  ucp_config_t* config = nullptr;
  ucs_check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read (check the UCX_* environment variables)");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
  const ucs_status_t init = ucp_init(&params, config, &s_->context);
  ucp_config_release(config);
  ucs_check(init, "ucp_init");
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // a layer streamer sends from its own thread
  const ucs_status_t created = ucp_worker_create(s_->context, &worker_params, &s_->worker);
  if (created != UCS_OK) ucp_cleanup(s_->context);
  ucs_check(created, "ucp_worker_create");
}

UcxTransport::~UcxTransport() {
  while (!s_->peers.empty()) remove_peer(s_->peers.begin()->first);
  for (State::Region& r : s_->regions) ucp_mem_unmap(s_->context, r.memh);
  ucp_worker_destroy(s_->worker);
  ucp_cleanup(s_->context);
}

int UcxTransport::register_memory(void* base, std::size_t length) {
  check(base != nullptr && length > 0, "kv transfer: cannot register an empty region");
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = base;
  params.length = length;
  State::Region region;
  region.base = static_cast<std::byte*>(base);
  region.length = length;
  ucs_check(ucp_mem_map(s_->context, &params, &region.memh), "ucp_mem_map");
  void* packed = nullptr;
  std::size_t packed_size = 0;
  const ucs_status_t status = ucp_rkey_pack(s_->context, region.memh, &packed, &packed_size);
  if (status != UCS_OK) ucp_mem_unmap(s_->context, region.memh);
  ucs_check(status, "ucp_rkey_pack");
  region.rkey = to_hex({static_cast<const std::byte*>(packed), packed_size});
  ucp_rkey_buffer_release(packed);
  s_->regions.push_back(std::move(region));
  return static_cast<int>(s_->regions.size()) - 1;
}

TransportInfo UcxTransport::local_info() {
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  ucs_check(ucp_worker_get_address(s_->worker, &address, &length), "ucp_worker_get_address");
  TransportInfo info;
  info.address = to_hex({reinterpret_cast<const std::byte*>(address), length});
  ucp_worker_release_address(s_->worker, address);
  for (const State::Region& r : s_->regions)
    info.regions.push_back({reinterpret_cast<std::uint64_t>(r.base), r.length, r.rkey});
  return info;
}

namespace {

// The endpoint parameters for a peer at @p address, with UCX's peer error handling where the transports
// have it (see shared_memory_only); @p error_arg receives the error callback's status.
ucp_ep_params_t endpoint_params(const std::vector<std::byte>& address, ucs_status_t* error_arg) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  if (!shared_memory_only(std::getenv("UCX_TLS"))) {
    params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t status) { *static_cast<ucs_status_t*>(arg) = status; };
    params.err_handler.arg = error_arg;
  }
  return params;
}

// ucp_ep_create(), and once more without peer error handling when transports the list in
// shared_memory_only() does not know refuse it.
ucs_status_t create_endpoint(ucp_worker_h worker, ucp_ep_params_t& params, ucp_ep_h* ep) {
  ucs_status_t status = ucp_ep_create(worker, &params, ep);
  if (status == UCS_ERR_UNREACHABLE && (params.field_mask & UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE) != 0) {
    params.field_mask &=
        ~static_cast<std::uint64_t>(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER);
    status = ucp_ep_create(worker, &params, ep);
  }
  return status;
}

// The line of @p text that says why UCX gave up: its first line, less the "[host:pid:thread:tid]" prefix.
std::string first_reason(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.starts_with('[') && line.find(']') != std::string::npos) line.erase(0, line.find(']') + 1);
  line.erase(0, std::min(line.find_first_not_of(' '), line.size()));
  return line.substr(0, 300);
}

// How long one check may take: unpacking takes milliseconds; a child past this is stuck on a lock it
// inherited (UCX's own, held by the parent's threads at the fork), which says nothing about the bytes.
// The worker's message loop waits for the check, so a stuck child must not hold it past the router's patience.
constexpr unsigned kCheckSeconds = 2;

// What the child's check found: the bytes unpack, they do not (and why), or the child timed out.
struct PeerCheck {
  enum class Verdict { passed, refused, timed_out } verdict = Verdict::passed;
  std::string why{};  // refused: UCX's own line and how the child ended
};

// UCX 1.13 trusts the bytes of a worker address and of a remote key as it unpacks them (it is
// given no length): garbage ends the process in one of its assertions (SIGABRT) or reads past
// the buffer. So a peer's address and keys are first unpacked in a forked child, whose death costs
// nothing. The child makes a UCX context of its own with the loopback transport only (self): it
// unpacks the whole address, then finds no transport to reach it (UNREACHABLE, which is a pass), so
// it never connects to the peer; the keys are unpacked on an endpoint to itself. Says whether
// both unpack, and why not when they do not.
PeerCheck try_in_child(const std::vector<std::byte>& address, const std::vector<std::vector<std::byte>>& keys) {
  int out[2];
  check(::pipe(out) == 0, "peer transport address: cannot check it (pipe: ", std::strerror(errno), ")");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDERR_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::alarm(kCheckSeconds);  // a child stuck on a lock some other thread of the parent held at the fork
    const char* what = "ucp_init (loopback only)";
    ucp_config_t* config = nullptr;
    ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
    if (status == UCS_OK) status = ucp_config_modify(config, "TLS", "self");
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
    ucp_context_h context = nullptr;
    ucp_worker_h worker = nullptr;
    if (status == UCS_OK) status = ucp_init(&params, config, &context);
    ucp_worker_params_t worker_params{};
    if (status == UCS_OK) status = ucp_worker_create(context, &worker_params, &worker);
    ucp_ep_h ep = nullptr;
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    if (status == UCS_OK) {
      what = "ucp_ep_create (peer address)";
      status = ucp_ep_create(worker, &ep_params, &ep);
      if (status == UCS_ERR_UNREACHABLE) status = UCS_OK;  // unpacked whole; only self is here to reach it by
    }
    ucp_address_t* own = nullptr;
    std::size_t own_length = 0;
    if (status == UCS_OK && !keys.empty()) status = ucp_worker_get_address(worker, &own, &own_length);
    if (status == UCS_OK && !keys.empty()) {
      ep_params.address = own;
      status = ucp_ep_create(worker, &ep_params, &ep);
    }
    for (std::size_t i = 0; i < keys.size() && status == UCS_OK; ++i) {
      ucp_rkey_h rkey = nullptr;
      what = "ucp_ep_rkey_unpack (peer remote key)";
      status = ucp_ep_rkey_unpack(ep, keys[i].data(), &rkey);
    }
    if (status != UCS_OK) {
      const std::string line = std::string("UCX ") + what + ": " + ucs_status_string(status) + "\n";
      (void)!::write(STDERR_FILENO, line.data(), line.size());
    }
    ::_exit(status == UCS_OK ? 0 : 1);  // no cleanup: everything UCX made dies with the child
  }
  ::close(out[1]);
  if (pid < 0) {
    ::close(out[0]);
    fail("peer transport address: cannot check it (fork: ", std::strerror(errno), ")");
  }
  std::string said;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (said.size() < 65536) said.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return {.verdict = PeerCheck::Verdict::timed_out};
  const std::string how = WIFSIGNALED(status) ? std::string("killed by ") + ::strsignal(WTERMSIG(status))
                                              : "exit status " + std::to_string(WEXITSTATUS(status));
  return {.verdict = PeerCheck::Verdict::refused,
          .why = first_reason(said) + " (tried in a child process: " + how + ")"};
}

}  // namespace

int UcxTransport::add_peer(const TransportInfo& info) {
  const std::vector<std::byte> address = from_hex(info.address, "peer transport address");
  check(!address.empty(), "peer transport address is empty");
  std::vector<std::vector<std::byte>> keys;
  for (const RemoteRegion& r : info.regions) keys.push_back(from_hex(r.rkey, "peer remote key"));
  // Garbage makes UCX abort or fail at once; a child that timed out hit an inherited lock, which says nothing
  // about the bytes, so the peer is accepted with a warning rather than refused.
  const PeerCheck checked = try_in_child(address, keys);
  if (checked.verdict == PeerCheck::Verdict::timed_out)
    std::cerr << "servelab: warning: the check of a peer's transport address timed out after " << kCheckSeconds
              << " s (a lock inherited at fork); the peer is accepted unchecked\n";
  else if (checked.verdict == PeerCheck::Verdict::refused)
    fail("peer transport address or remote key refused: ", checked.why);
  const int id = s_->next_peer++;
  State::Peer& p = s_->peers[id];
  ucp_ep_params_t params = endpoint_params(address, &p.error);
  if (const ucs_status_t status = create_endpoint(s_->worker, params, &p.ep); status != UCS_OK) {
    s_->peers.erase(id);
    ucs_check(status, "ucp_ep_create (peer address)");
  }
  try {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      ucp_rkey_h rkey = nullptr;
      ucs_check(ucp_ep_rkey_unpack(p.ep, keys[i].data(), &rkey), "ucp_ep_rkey_unpack (peer remote key)");
      p.rkeys.push_back(rkey);
      p.regions.push_back(info.regions[i]);
    }
  } catch (...) {
    remove_peer(id);
    throw;
  }
  return id;
}

void UcxTransport::remove_peer(int peer) {
  const auto it = s_->peers.find(peer);
  if (it == s_->peers.end()) return;
  for (ucp_rkey_h k : it->second.rkeys) ucp_rkey_destroy(k);
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  params.flags = UCP_EP_CLOSE_FLAG_FORCE;  // no goodbye: the peer may be gone
  void* request = ucp_ep_close_nbx(it->second.ep, &params);
  if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
    const double deadline = now_seconds() + 1.0;
    while (ucp_request_check_status(request) == UCS_INPROGRESS && now_seconds() < deadline)
      ucp_worker_progress(s_->worker);
    ucp_request_free(request);
  }
  s_->peers.erase(it);
}

void UcxTransport::write(int peer, std::span<const TransferDescriptor> descriptors, const TransferOptions& options) {
  one_sided(peer, descriptors, options, true);
}

void UcxTransport::read(int peer, std::span<const TransferDescriptor> descriptors, const TransferOptions& options) {
  one_sided(peer, descriptors, options, false);
}

void UcxTransport::one_sided(int peer, std::span<const TransferDescriptor> descriptors, const TransferOptions& options,
                             bool put) {
  State::Peer& p = s_->peer(peer);
  const double start = now_seconds();
  std::vector<void*> pending;
  std::uint64_t bytes = 0;
  for (const Piece& piece : cut(descriptors)) {
    s_->pace(start, bytes, options.pace_bytes_per_second);
    bytes += piece.length;
    std::byte* local = s_->local(piece.local_region, piece.local_offset, piece.length);
    const std::uint64_t remote = s_->remote(p, piece.remote_region, piece.remote_offset, piece.length);
    const ucp_rkey_h rkey = p.rkeys[static_cast<std::size_t>(piece.remote_region)];
    ucp_request_param_t params{};
    s_->track(pending,
              put ? ucp_put_nbx(p.ep, local, piece.length, remote, rkey, &params)
                  : ucp_get_nbx(p.ep, local, piece.length, remote, rkey, &params),
              put ? "put" : "get");
  }
  // The operations completing locally says nothing about the peer's memory: the flush does.
  ucp_request_param_t flush{};
  s_->track(pending, ucp_ep_flush_nbx(p.ep, &flush), "flush");
  s_->wait(pending, start + options.timeout_seconds, put ? "write" : "read", &p);
  s_->pace(start, bytes, options.pace_bytes_per_second);
}

void UcxTransport::send(int peer, std::uint64_t tag, std::span<const TransferDescriptor> descriptors,
                        const TransferOptions& options) {
  State::Peer& p = s_->peer(peer);
  const double start = now_seconds();
  std::vector<void*> pending;
  std::uint64_t bytes = 0, index = 0;
  for (const Piece& piece : cut(descriptors)) {
    s_->pace(start, bytes, options.pace_bytes_per_second);
    bytes += piece.length;
    const std::byte* src = s_->local(piece.local_region, piece.local_offset, piece.length);
    ucp_request_param_t params{};
    s_->track(pending, ucp_tag_send_nbx(p.ep, src, piece.length, tag + index++, &params), "tagged send");
  }
  s_->wait(pending, start + options.timeout_seconds, "send", &p);
  s_->pace(start, bytes, options.pace_bytes_per_second);
}

void UcxTransport::recv(std::uint64_t tag, std::span<const TransferDescriptor> descriptors,
                        const TransferOptions& options) {
  const double start = now_seconds();
  std::vector<void*> pending;
  std::uint64_t index = 0;
  for (const Piece& piece : cut(descriptors)) {
    std::byte* dst = s_->local(piece.local_region, piece.local_offset, piece.length);
    ucp_request_param_t params{};
    s_->track(pending, ucp_tag_recv_nbx(s_->worker, dst, piece.length, tag + index++, ~ucp_tag_t{0}, &params),
              "tagged receive");
  }
  s_->wait(pending, start + options.timeout_seconds, "receive", nullptr);
}

void UcxTransport::progress() {
  while (ucp_worker_progress(s_->worker) != 0) {
  }
}

}  // namespace servelab::disagg
