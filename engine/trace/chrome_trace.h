// SPDX-License-Identifier: MIT
/**
 * @file chrome_trace.h
 * @brief A step observer that writes the engine's steps and every request's
 *        phases as Chrome Trace Event JSON (the JSON array form), which
 *        Perfetto (ui.perfetto.dev) and chrome://tracing open.
 * @verbatim
 *  process "engine run 1: <label> (wall clock)"         one per attached engine
 *    thread "engine steps"   step N [schedule|forward|sample|update], preempt instants
 *    thread "request 3"      queued ─ prefill ─ prefill ─ decode ····· ◆first token ◆finish
 *                                            ◆preempted ─ preempted (waiting) ─ prefill (recompute) ─ decode
 *    counters                requests {running, waiting}, kv blocks {used, free}, tokens {prefill, decode}
 * @endverbatim
 * Timestamps are the engine clock in microseconds; on a simulated engine that
 * clock is the cost model's, and the process name says "simulated clock". Each
 * step event's args carry the step record (trace/step_json.h; block tables as
 * changes since the step before), so the dashboard page can replay the file.
 *
 * The file is written as the engine runs, through a buffer. It is bounded: once
 * it reaches max_bytes no more events are written, one "trace truncated" instant
 * says where, stderr says so once, and close() still ends every open span.
 */
#pragma once

#include <cstddef>
#include <cstdio>
#include <map>
#include <string>

#include "serve/engine.h"
#include "trace/step_json.h"

namespace servelab {

/// Writes a Chrome trace of every engine attached to it.
class ChromeTrace final : public StepObserver {
 public:
  /// The default cap on the file, bytes.
  static constexpr std::size_t kDefaultMaxBytes = std::size_t{256} << 20;

  /**
   * @brief Creates (or truncates) @p path and writes the trace's opening.
   * @param max_bytes the cap (at least 64 KiB).
   * @throws Error naming --trace when the file cannot be written or @p max_bytes is too small.
   */
  explicit ChromeTrace(std::string path, std::size_t max_bytes = kDefaultMaxBytes);
  /// close().
  ~ChromeTrace() override;
  ChromeTrace(const ChromeTrace&) = delete;
  ChromeTrace& operator=(const ChromeTrace&) = delete;

  /**
   * @brief Starts a new process in the trace for @p engine, named "engine run K: @p label
   *        (wall clock | simulated clock)", and observes @p engine until detach().
   *        Ends the previous engine's spans if it is still attached.
   */
  void attach(Engine& engine, const std::string& label);
  /// Stops observing the attached engine and ends its requests' open spans at its clock's now().
  void detach();
  /**
   * @brief Starts a new process for records fed by hand through on_request() and on_step()
   *        (a loop that steps a model without an Engine: `servelab generate`).
   * @param simulated whether the records' clock is a cost model's.
   */
  void begin_run(const std::string& label, bool simulated);
  /// Ends the current process's open spans at @p at (engine-clock seconds).
  void end_run(double at);

  void on_request(const RequestEvent& event) override;
  void on_step(const StepRecord& record) override;

  /// Detaches, ends the JSON and closes the file; idempotent. @throws Error when the final write fails.
  void close();

  /// The file's path.
  const std::string& path() const { return path_; }
  /// Bytes written so far.
  std::size_t bytes() const { return bytes_; }
  /// Events written so far.
  long events() const { return events_; }
  /// True once the cap stopped the trace.
  bool truncated() const { return truncated_; }
  /// One line for stderr: "<path>: N events, R engine runs, X MiB[, truncated at ...]".
  std::string summary() const;

 private:
  /// Where a request is in its life, as its track shows it.
  struct Track {
    enum class Span { NONE, QUEUED, PREEMPTED, DECODE };
    Span open = Span::NONE;  // the span drawn until the next change
    double since = 0;        // when it opened, seconds
    double until = 0;        // for DECODE: the end of its last decode step
    int tokens = 0;          // for DECODE: tokens decoded in it
    bool recompute = false;  // preempted before: its next prefill recomputes thrown-away KV
  };

  void write(const std::string& event);  // appends one event, no cap
  void emit(const std::string& event);   // write() while under the cap; truncate() when this one would pass it
  void truncate();                       // marks the file truncated and ends every open span here
  void span(int tid, const char* name, double start, double end, const std::string& args = {});
  void instant(int tid, const char* name, double at, const std::string& args = {});
  void counter(const char* name, double at, const char* a, long va, const char* b, long vb);
  void close_span(int id, Track& track, double at);

  std::string path_;
  std::FILE* file_ = nullptr;
  std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  long events_ = 0;
  bool truncated_ = false;
  bool ending_ = false;                          // closing spans: the bytes kept back for them are spent now
  std::string truncated_at_;                     // where the cap stopped it, for summary()
  int runs_ = 0;                                 // processes started; the current one's pid
  Engine* engine_ = nullptr;                     // attached, or null
  std::map<int, Track> tracks_;                  // request id -> its track, this run
  BlockTables tables_;                           // block tables as the last step left them, this run
  long counters_[6] = {-1, -1, -1, -1, -1, -1};  // last running, waiting, used, free, prefill, decode written
  std::string line_;                             // scratch for one event
};

}  // namespace servelab
