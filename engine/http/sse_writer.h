// SPDX-License-Identifier: MIT
/**
 * @file sse_writer.h
 * @brief One thread that writes every streamed reply's SSE chunks, woken once
 *        per engine step instead of once per token per connection.
 * @verbatim
 *  engine loop: step ──► each token to its RequestStream ──► SseWriter::notify()   (one wake-up, or none)
 *  writer thread: for every stream: new events ──► "len\r\n events \r\n" ──► send(MSG_DONTWAIT)
 *  handler thread: SseWriter::stream() sleeps until its reply is written whole (or the client left)
 * @endverbatim
 * With a thread per connection and a wake-up per token, a 16-stream batch of a
 * small model woke 16 handler threads every 2 ms step; on two cores those
 * wake-ups and their context switches were most of what HTTP cost beside the
 * engine. Here the handler thread still holds its connection (cpp-httplib's
 * model) but sleeps through the reply, and a client that reads slowly
 * gets its tokens coalesced into fewer, larger chunks.
 *
 * With a stream interval (`serve --stream-interval-us`, 0 by default) the
 * writer also coalesces on purpose. After a pass that wrote, the steps that
 * follow do not wake it (their tokens wait in their RequestStreams) until the
 * interval has passed; the first step's end after that writes them all, each
 * token still its own `data:` event but several to a chunk. A step that gives
 * some reply its first token or ends one still wakes it at once: a reply's
 * first and last events never wait. On a model whose step is longer than the
 * interval nothing changes; on a tiny model whose steps take 2-3 ms, each
 * wake-up, send() and the client's recv() are shared by several tokens
 * (docs/serving.md, "A stream interval"). SGLang's `--stream-interval` trades
 * the same way, counted in tokens.
 */
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace servelab {

/// A streamed reply as the writer reads it; only the writer thread calls it while the reply streams.
class SseSource {
 public:
  virtual ~SseSource() = default;
  /**
   * @brief The SSE events (`data: ...\n\n`, possibly several) for what arrived since the last call.
   * @param ended set to true with the reply's last events; the source is not called again after that.
   * @return the events' bytes; empty when nothing new arrived.
   */
  virtual std::string take_events(bool& ended) = 0;
};

/// Writes HTTP/1.1 chunked SSE bodies for many connections from one thread.
class SseWriter {
 public:
  /// The zero-length chunk that ends an HTTP/1.1 chunked body (no trailers).
  static constexpr std::string_view kLastChunk = "0\r\n\r\n";
  /// Most bytes a reply may have waiting for a slow client; past this the client is dropped.
  static constexpr std::size_t kMaxPendingBytes = 4 << 20;

  /**
   * @brief Starts the writer thread.
   * @param stall_timeout a client that takes none of a reply's waiting bytes for this long has gone
   *        away (the handler's write gave up after the same 5 s before this writer).
   * @param stream_interval least time between two passes that write held events (0: write every
   *        step's events at once); a reply's first and last events are written without waiting.
   * @throws Error naming --stream-interval-us when @p stream_interval is outside [0, 1 s].
   */
  explicit SseWriter(std::chrono::milliseconds stall_timeout = std::chrono::seconds(5),
                     std::chrono::microseconds stream_interval = std::chrono::microseconds(0));
  /// stop(), then joins the thread.
  ~SseWriter();
  SseWriter(const SseWriter&) = delete;
  SseWriter& operator=(const SseWriter&) = delete;

  /**
   * @brief Streams @p source to the connected socket @p fd as HTTP chunks, until its last event
   *        is written; blocks the calling (handler) thread meanwhile.
   *
   * The response's status line and headers must already be on the socket. The body's last
   * (zero-length) chunk, kLastChunk, is written too, with the last events: the caller must not
   * write it again.
   * @return true when every byte was written; false when the client stopped reading, the
   *         socket failed, or the writer was stopped.
   */
  bool stream(int fd, SseSource& source);
  /**
   * @brief Something new may be waiting in some source: the engine loop calls this after each step.
   * @param urgent some reply got its first events or its last: with a stream interval, a step that is
   *        not urgent wakes the writer only once the interval has passed (the tokens wait in their sources).
   */
  void notify(bool urgent = true);
  /// Fails every reply in progress and every later stream() call (the server is stopping). Idempotent.
  void stop();

 private:
  struct Entry;
  void run();
  void wake();  // one more count on wake_fd_: the writer's poll() returns
  // Takes new events, writes what the socket accepts; true when the entry is finished (ok or failed).
  // @p flush: this pass writes held events (the interval has passed); @p wrote_held is set when it framed
  // events past a reply's first.
  bool service(Entry& e, std::chrono::steady_clock::time_point now, bool flush, bool& wrote_held);
  void finish(Entry& e, bool ok);

  const std::chrono::milliseconds stall_timeout_;
  const std::chrono::microseconds stream_interval_;
  int wake_fd_ = -1;  // eventfd: notify() and stream() wake the writer's poll()
  std::mutex mutex_;  // guards added_, stopping_ and every Entry's done/ok
  std::vector<std::shared_ptr<Entry>> added_;  // registered, not yet taken by the writer
  bool stopping_ = false;
  // When held events may go out (steady_clock ticks; 0 = at once); written by the writer thread, read by notify() too.
  std::atomic<std::chrono::steady_clock::rep> next_flush_{0};
  std::atomic<int> active_{0};  // replies registered and not finished: notify() is free at 0
  std::thread thread_;
};

}  // namespace servelab
