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
  std::string pending;  // framed chunks the socket has not taken yet, from byte `sent` on
  std::size_t sent = 0;
  bool ended = false;  // the source gave its last events
  std::chrono::steady_clock::time_point last_progress;
  bool done = false, ok = false;  // under mutex_: the handler's answer
  std::condition_variable finished;  // the handler waits here: a reply's end wakes its own handler only
};

SseWriter::SseWriter(std::chrono::milliseconds stall_timeout) : stall_timeout_(stall_timeout) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  check(wake_fd_ >= 0, "SseWriter: eventfd failed (errno ", errno, ")");
  thread_ = std::thread([this] { run(); });
}

SseWriter::~SseWriter() {
  stop();
  thread_.join();
  ::close(wake_fd_);
}

void SseWriter::notify() {
  if (active_.load(std::memory_order_relaxed) == 0) return;  // nothing streams: no wake-up to pay for
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

bool SseWriter::service(Entry& e, std::chrono::steady_clock::time_point now) {
  if (!e.ended) {
    bool ended = false;
    const std::string events = e.source->take_events(ended);
    e.ended = ended;
    if (!events.empty() || ended) {
      if (e.pending.empty()) e.last_progress = now;  // a stall counts from when bytes start waiting
      if (!events.empty()) {
        char size[24];
        const int len = std::snprintf(size, sizeof size, "%zx\r\n", events.size());
        e.pending.append(size, static_cast<std::size_t>(len)).append(events).append("\r\n");
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
  for (;;) {
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    for (const auto& e : streaming)
      if (!e->pending.empty()) fds.push_back({e->fd, POLLOUT, 0});
    // The timeout bounds how late a stalled client is noticed when no step wakes the writer.
    ::poll(fds.data(), fds.size(), 100);
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
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(streaming, [&](const std::shared_ptr<Entry>& e) { return service(*e, now); });
  }
}

}  // namespace servelab
