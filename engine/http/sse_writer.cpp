// SPDX-License-Identifier: MIT
#include "http/sse_writer.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>

#include "core/error.h"

namespace servelab {

struct SseWriter::Entry {
  int fd;
  SseSource* source;
  std::string held;     // events taken from the source, not yet framed: they wait for the stream interval
  std::string pending;  // framed chunks the socket has not taken yet, from byte `sent` on
  std::size_t sent = 0;
  bool started = false;  // the first events are framed (they never wait)
  bool ended = false;    // the source gave its last events
  std::chrono::steady_clock::time_point last_progress;
  bool done = false, ok = false;  // under mutex_: the handler's answer
  std::condition_variable finished;  // the handler waits here: a reply's end wakes its own handler only
};

SseWriter::SseWriter(std::chrono::milliseconds stall_timeout, std::chrono::microseconds stream_interval)
    : stall_timeout_(stall_timeout), stream_interval_(stream_interval) {
  check(stream_interval >= std::chrono::microseconds(0) && stream_interval <= std::chrono::seconds(1),
        "--stream-interval-us must be in [0, 1000000], got ", stream_interval.count());
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  check(wake_fd_ >= 0, "SseWriter: eventfd failed (errno ", errno, ")");
  thread_ = std::thread([this] { run(); });
}

SseWriter::~SseWriter() {
  stop();
  thread_.join();
  ::close(wake_fd_);
}

void SseWriter::notify(bool urgent) {
  if (active_.load(std::memory_order_relaxed) == 0) return;  // nothing streams: no wake-up to pay for
  // Before the interval has passed, a step's tokens wait in their sources: waking the writer for them
  // would cost a context switch per step, the very cost the interval is there to share.
  if (!urgent &&
      std::chrono::steady_clock::now().time_since_epoch().count() < next_flush_.load(std::memory_order_relaxed))
    return;
  wake();
}

void SseWriter::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);  // only fails when the counter is full
}

void SseWriter::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake();
}

bool SseWriter::stream(int fd, SseSource& source) {
  auto e = std::make_shared<Entry>();
  e->fd = fd;
  e->source = &source;
  std::unique_lock lock(mutex_);
  if (stopping_) return false;
  added_.push_back(e);
  active_.fetch_add(1);
  wake();
  e->finished.wait(lock, [&] { return e->done; });
  return e->ok;
}

void SseWriter::finish(Entry& e, bool ok) {
  {
    std::lock_guard lock(mutex_);
    e.done = true;
    e.ok = ok;
    e.finished.notify_one();  // under the lock: the handler may free the entry as soon as it sees done
  }
  active_.fetch_sub(1);
}

bool SseWriter::service(Entry& e, std::chrono::steady_clock::time_point now, bool flush, bool& wrote_held) {
  if (!e.ended) {
    bool ended = false;
    e.held += e.source->take_events(ended);
    e.ended = ended;
    if ((!e.held.empty() && (flush || !e.started)) || ended) {
      if (e.pending.empty()) e.last_progress = now;  // a stall counts from when bytes start waiting
      if (!e.held.empty()) {
        char size[24];
        const int len = std::snprintf(size, sizeof size, "%zx\r\n", e.held.size());
        e.pending.append(size, static_cast<std::size_t>(len)).append(e.held).append("\r\n");
        e.held.clear();
        wrote_held = wrote_held || e.started;
        e.started = true;
      }
      // The body's last chunk goes out with the last events: the client has the whole reply, and can
      // send its next request, without waiting for the handler thread to be woken to write it.
      if (ended) e.pending.append(kLastChunk);
    }
  }
  while (e.sent < e.pending.size()) {
    const ssize_t n = ::send(e.fd, e.pending.data() + e.sent, e.pending.size() - e.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {  // the client reset or closed the connection
      finish(e, false);
      return true;
    }
    e.sent += static_cast<std::size_t>(n);
    e.last_progress = now;
  }
  if (e.sent == e.pending.size()) {
    e.pending.clear(), e.sent = 0;
  } else if (now - e.last_progress > stall_timeout_ || e.pending.size() - e.sent > kMaxPendingBytes) {
    finish(e, false);  // a client that reads nothing (or far too little) is gone; its handler drops it
    return true;
  }
  if (e.ended && e.pending.empty()) {
    finish(e, true);
    return true;
  }
  return false;
}

void SseWriter::run() {
  std::vector<std::shared_ptr<Entry>> streaming;
  std::vector<pollfd> fds;
  using clock = std::chrono::steady_clock;
  const auto next_flush = [&] {
    return clock::time_point(clock::duration(next_flush_.load(std::memory_order_relaxed)));
  };
  auto last_pass = clock::now();
  for (;;) {
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    for (const auto& e : streaming)
      if (!e->pending.empty()) fds.push_back({e->fd, POLLOUT, 0});
    // The timeout bounds how late a stalled client is noticed when no step wakes the writer. With an
    // interval, held events (and tokens still in their sources) go out at the first step's end past
    // next_flush, between two steps rather than in the middle of one, where the writer would take a
    // core from a parallel loop; this timer sends them only when no step has come for another interval
    // (a long prefill, a batch that went idle).
    auto timeout = std::chrono::nanoseconds(std::chrono::milliseconds(100));
    if (stream_interval_.count() > 0 && !streaming.empty())
      timeout = std::clamp<std::chrono::nanoseconds>(
          std::max(next_flush(), last_pass) + stream_interval_ - clock::now(), std::chrono::nanoseconds(0), timeout);
    const timespec ts{static_cast<time_t>(timeout.count() / 1'000'000'000),
                      static_cast<long>(timeout.count() % 1'000'000'000)};
    ::ppoll(fds.data(), fds.size(), &ts, nullptr);
    std::uint64_t wakes;
    [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &wakes, sizeof wakes);
    bool stopping;
    {
      std::lock_guard lock(mutex_);
      stopping = stopping_;
      streaming.insert(streaming.end(), added_.begin(), added_.end());
      added_.clear();
    }
    if (stopping) {
      for (const auto& e : streaming) finish(*e, false);
      return;
    }
    const auto now = clock::now();
    const bool flush = now >= next_flush();
    bool wrote_held = false;
    std::erase_if(streaming, [&](const std::shared_ptr<Entry>& e) { return service(*e, now, flush, wrote_held); });
    last_pass = now;
    // The interval runs from the last pass that wrote tokens past a reply's first: after a quiet spell
    // (or a pass that only took new replies) the next step's tokens go out at once.
    if (flush && wrote_held)
      next_flush_.store((now + stream_interval_).time_since_epoch().count(), std::memory_order_relaxed);
  }
}

}  // namespace servelab
