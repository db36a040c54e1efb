// SPDX-License-Identifier: MIT
#include "disagg/client.h"

#include <chrono>
#include <limits>
#include <thread>

#include "core/error.h"
#include "core/timer.h"

namespace servelab::disagg {

namespace {

// @p m with the cluster key @p key added, when there is one.
Message keyed(Message m, const std::string& key) {
  if (!key.empty()) m["key"] = key;
  return m;
}

}  // namespace

std::vector<ClientResult> run_client(const std::string& endpoint, std::span<const ClientRequest> requests,
                                     double timeout, const std::string& key) {
  zmq::context_t context;
  zmq::socket_t socket = connect_dealer(context, endpoint);
  std::vector<ClientResult> results(requests.size());
  std::vector<bool> done(requests.size(), false);
  const double start = now_seconds(), deadline = start + timeout;
  std::size_t next = 0, remaining = requests.size();
  while (remaining > 0) {
    const double now = now_seconds() - start;
    while (next < requests.size() && requests[next].arrival <= now) {
      const ClientRequest& r = requests[next];
      results[next].times.arrival = now;
      results[next].times.first_scheduled = now;  // the router queues it at once; the client sees no more
      Message submit = {{"type", "submit"}, {"client_req", next}, {"prompt", r.prompt}, {"max_tokens", r.max_tokens}};
      put_sampling(submit, r.sampling);
      send_message(socket, keyed(submit, key));
      ++next;
    }
    const double wait_until = next < requests.size() ? std::min(start + requests[next].arrival, deadline) : deadline;
    const auto m = receive_message(socket, std::max(0, static_cast<int>((wait_until - now_seconds()) * 1000)));
    if (!m) {
      if (now_seconds() < deadline) continue;
      std::string open;
      for (std::size_t i = 0; i < requests.size(); ++i)
        if (!done[i]) {
          open += ' ';
          open += std::to_string(i);
        }
      fail("router ", endpoint, ": requests", open, " did not finish within ", timeout, " s");
    }
    const auto i = static_cast<std::size_t>(field_int(*m, "req", 0, static_cast<std::int64_t>(requests.size()) - 1));
    ClientResult& r = results[i];
    const std::string type = (*m)["type"];
    const double t = now_seconds() - start;
    if (type == "token") {
      r.tokens.push_back(
          static_cast<std::int32_t>(field_int(*m, "token", 0, std::numeric_limits<std::int32_t>::max())));
      r.times.token_times.push_back(t);
    } else if ((type == "finished" || type == "failed") && !done[i]) {
      if (type == "failed") r.error = field_string(*m, "reason");
      r.accounting = m->value("accounting", Message::object());
      r.times.finished = t;
      done[i] = true;
      --remaining;
    }
  }
  return results;
}

void wait_for_workers(const std::string& endpoint, int prefill, int decode, double timeout, const std::string& key) {
  zmq::context_t context;
  zmq::socket_t socket = connect_dealer(context, endpoint);
  const double deadline = now_seconds() + timeout;
  int have_prefill = 0, have_decode = 0;
  // With both roles asked for, a worker counts once it has linked to a partner (each added the other's
  // transport): before that a request would wait in the router, and its TTFT would time the handshake.
  const char* counted = prefill > 0 && decode > 0 ? "linked" : "workers";
  while (now_seconds() < deadline) {
    send_message(socket, keyed({{"type", "status"}}, key));
    if (const auto m = receive_message(socket, 200); m && (*m)["type"] == "status") {
      const Message& w = m->at(counted);
      const auto count = [&](const char* role) { return static_cast<int>(field_int(w, role, 0, 1 << 20)); };
      have_prefill = count("prefill") + count("both");
      have_decode = count("decode") + count("both");
      if (have_prefill >= prefill && have_decode >= decode) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  fail("router ", endpoint, ": ", have_prefill, " prefill and ", have_decode, " decode workers ",
       counted == std::string("linked") ? "registered and linked" : "registered", " within ", timeout,
       " s (waited for ", prefill, " and ", decode, ")");
}

void shutdown_router(const std::string& endpoint, const std::string& key) {
  zmq::context_t context;
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 500);  // long enough to hand the one message over
  socket.connect(endpoint);
  send_message(socket, keyed({{"type", "shutdown"}}, key));
}

}  // namespace servelab::disagg
