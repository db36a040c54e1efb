// SPDX-License-Identifier: MIT
#include "trace/chrome_trace.h"

#include <cerrno>
#include <cstring>
#include <iostream>

#include "core/error.h"

namespace servelab {

namespace {

// Bytes kept back for ending the open spans and the JSON once the cap is near, per open track and overall.
constexpr std::size_t kReservePerTrack = 256;
constexpr std::size_t kReserve = 4096;

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + '"';
}

const char* reason_name(FinishReason r) {
  return r == FinishReason::STOP ? "finish (stop)" : r == FinishReason::LENGTH ? "finish (length)" : "finish (abort)";
}

}  // namespace

ChromeTrace::ChromeTrace(std::string path, std::size_t max_bytes) : path_(std::move(path)), max_bytes_(max_bytes) {
  check(!path_.empty(), "--trace is empty (expected a file to write the trace to)");
  check(max_bytes_ >= (64u << 10), "--trace: a cap of ", max_bytes_, " bytes is too small (at least 65536)");
  file_ = std::fopen(path_.c_str(), "w");
  check(file_ != nullptr, "--trace ", path_, ": cannot write it (", std::strerror(errno), ")");
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  std::fputs("[\n", file_);
  bytes_ = 2;
}

ChromeTrace::~ChromeTrace() {
  try {
    close();
  } catch (const Error& e) {
    std::cerr << "servelab: " << e.what() << "\n";
  }
}

void ChromeTrace::write(const std::string& event) {
  if (events_ > 0) std::fputs(",\n", file_), bytes_ += 2;
  std::fwrite(event.data(), 1, event.size(), file_);
  bytes_ += event.size();
  ++events_;
}

void ChromeTrace::emit(const std::string& event) {
  if (!file_ || (truncated_ && !ending_)) return;
  if (!ending_ && bytes_ + event.size() + kReserve + kReservePerTrack * tracks_.size() > max_bytes_) {
    truncate();
    return;
  }
  write(event);
}

void ChromeTrace::truncate() {
  truncated_ = true;
  const double at = engine_ ? engine_->now() : 0;
  truncated_at_ = "engine run " + std::to_string(runs_) + ", " + std::to_string(at) + " s";
  std::cerr << "servelab: --trace " << path_ << ": reached its cap of " << max_bytes_ << " bytes at " << truncated_at_
            << "; later events are not recorded (the open spans end there)\n";
  std::string marker = "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"trace truncated (cap reached)\",\"pid\":";
  marker += std::to_string(runs_) + ",\"tid\":0,\"ts\":";
  append_fixed(marker, at * 1e6, 3);
  write(marker + '}');
  // Spans end where the trace does; the tracks stay (callers may hold references to them) but draw nothing more.
  ending_ = true;
  for (auto& [id, t] : tracks_) close_span(id, t, std::max(at, t.since));
  ending_ = false;
}

void ChromeTrace::span(int tid, const char* name, double start, double end, const std::string& args) {
  std::string e = "{\"ph\":\"X\",\"name\":\"";
  e += name;
  e += "\",\"pid\":" + std::to_string(runs_) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":";
  append_fixed(e, start * 1e6, 3);
  e += ",\"dur\":";
  append_fixed(e, (end > start ? end - start : 0) * 1e6, 3);
  if (!args.empty()) e += ",\"args\":" + args;
  e += '}';
  emit(e);
}

void ChromeTrace::instant(int tid, const char* name, double at, const std::string& args) {
  std::string e = "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"";
  e += name;
  e += "\",\"pid\":" + std::to_string(runs_) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":";
  append_fixed(e, at * 1e6, 3);
  if (!args.empty()) e += ",\"args\":" + args;
  e += '}';
  emit(e);
}

void ChromeTrace::counter(const char* name, double at, const char* a, long va, const char* b, long vb) {
  std::string e = "{\"ph\":\"C\",\"name\":\"";
  e += name;
  e += "\",\"pid\":" + std::to_string(runs_) + ",\"tid\":0,\"ts\":";
  append_fixed(e, at * 1e6, 3);
  e += ",\"args\":{\"" + std::string(a) + "\":" + std::to_string(va) + ",\"" + b + "\":" + std::to_string(vb) + "}}";
  emit(e);
}

void ChromeTrace::begin_run(const std::string& label, bool simulated) {
  if (engine_) detach();
  ++runs_;
  std::fill(std::begin(counters_), std::end(counters_), -1);
  const std::string name = "engine run " + std::to_string(runs_) + ": " + label +
                           (simulated ? " (simulated clock: the cost model's seconds)" : " (wall clock)");
  const std::string pid = std::to_string(runs_);
  emit("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"name\":" + quoted(name) +
       "}}");
  emit("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"sort_index\":" + pid +
       "}}");
  emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"name\":\"engine steps\"}}");
}

void ChromeTrace::attach(Engine& engine, const std::string& label) {
  begin_run(label, engine.simulated());
  engine_ = &engine;
  engine.add_observer(this);
}

void ChromeTrace::close_span(int id, Track& t, double at) {
  const int tid = id + 1;
  switch (t.open) {
    case Track::Span::QUEUED: span(tid, "queued", t.since, at); break;
    case Track::Span::PREEMPTED: span(tid, "preempted (waiting to recompute)", t.since, at); break;
    case Track::Span::DECODE:
      span(tid, "decode", t.since, t.until, "{\"tokens\":" + std::to_string(t.tokens) + "}");
      break;
    case Track::Span::NONE: break;
  }
  t.open = Track::Span::NONE;
}

void ChromeTrace::end_run(double at) {
  if (!truncated_) {  // truncate() ended what was open when the cap came
    ending_ = true;
    for (auto& [id, t] : tracks_) close_span(id, t, std::max(at, t.since));
    ending_ = false;
  }
  tracks_.clear();
  tables_.clear();
}

void ChromeTrace::detach() {
  if (!engine_) return;
  end_run(engine_->now());
  engine_->remove_observer(this);
  engine_ = nullptr;
}

void ChromeTrace::on_request(const RequestEvent& e) {
  if (truncated_) return;
  const int tid = e.request_id + 1;
  if (e.kind == RequestEvent::Kind::ADDED) {
    const std::string pid = std::to_string(runs_);
    emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + std::to_string(tid) +
         ",\"args\":{\"name\":\"request " + std::to_string(e.request_id) + "\"}}");
    emit("{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + pid + ",\"tid\":" + std::to_string(tid) +
         ",\"args\":{\"sort_index\":" + std::to_string(tid) + "}}");
    instant(tid, "arrived", e.time,
            "{\"prompt_tokens\":" + std::to_string(e.num_prompt_tokens) +
                ",\"max_tokens\":" + std::to_string(e.max_tokens) + "}");
    if (!truncated_) tracks_[e.request_id] = {Track::Span::QUEUED, e.time, 0, 0};
    return;
  }
  const auto it = tracks_.find(e.request_id);
  if (it == tracks_.end()) return;
  close_span(e.request_id, it->second, std::max(e.time, it->second.since));
  instant(tid, "finish (abort)", e.time);
  tracks_.erase(it);
}

void ChromeTrace::on_step(const StepRecord& r) {
  if (truncated_) return;
  // The step on the engine's track, its time split inside it (the record in its args).
  // (An empty step is written only when blocks moved, an abort's: the counters below never lack their step.)
  if (!r.scheduled.empty() || !r.preempted.empty() || r.num_used_blocks() != counters_[2]) {
    line_.clear();
    append_step_json(line_, r, &tables_);
    span(0, "step", r.start, r.end, line_);
    for (const Preemption& p : r.preempted)
      instant(0, "preempt", r.start,
              "{\"request\":" + std::to_string(p.request_id) +
                  ",\"tokens_discarded\":" + std::to_string(p.tokens_discarded) + "}");
    if (!r.simulated) {
      double at = r.start;
      const std::pair<const char*, double> parts[] = {{"schedule", r.schedule_seconds},
                                                      {"forward", r.forward_seconds},
                                                      {"sample", r.sample_seconds},
                                                      {"update", r.update_seconds}};
      for (const auto& [name, seconds] : parts) {
        if (seconds <= 0) continue;
        span(0, name, at, at + seconds);
        at += seconds;
      }
    }
  }
  for (const Preemption& p : r.preempted) {
    const std::string args = "{\"request\":" + std::to_string(p.request_id) +
                             ",\"tokens_discarded\":" + std::to_string(p.tokens_discarded) + "}";
    auto& t = tracks_[p.request_id];
    close_span(p.request_id, t, r.start);
    instant(p.request_id + 1, "preempted", r.start, args);
    t = {Track::Span::PREEMPTED, r.start, 0, 0, true};
  }
  for (const StepShare& s : r.scheduled) {
    Track& t = tracks_[s.request_id];
    if (t.open == Track::Span::QUEUED || t.open == Track::Span::PREEMPTED) close_span(s.request_id, t, r.start);
    if (s.decode) {
      if (t.open != Track::Span::DECODE) t = {Track::Span::DECODE, r.start, r.end, 0};
      t.until = r.end;
      ++t.tokens;
    } else {
      close_span(s.request_id, t, r.start);
      const char* name = t.recompute                  ? "prefill (recompute after preemption)"
                         : s.num_computed_before == 0 ? "prefill"
                                                      : "prefill chunk";
      span(s.request_id + 1, name, r.start, r.end,
           "{\"tokens\":" + std::to_string(s.num_new_tokens) + ",\"after\":" + std::to_string(s.num_computed_before) +
               "}");
    }
  }
  for (int id : r.first_token) instant(id + 1, "first token", r.end);
  for (std::size_t i = 0; i < r.finished.size(); ++i) {
    const int id = r.finished[i];
    if (auto it = tracks_.find(id); it != tracks_.end()) {
      close_span(id, it->second, r.end);
      tracks_.erase(it);
    }
    instant(id + 1, reason_name(r.finish_reasons[i]), r.end);
  }
  // Counters only when they move: a long decode run would otherwise repeat them every step.
  const long values[6] = {static_cast<long>(r.running.size()),
                          static_cast<long>(r.waiting.size()),
                          r.num_used_blocks(),
                          r.num_free_blocks,
                          r.num_prefill_tokens,
                          r.num_decode_tokens};
  if (values[0] != counters_[0] || values[1] != counters_[1])
    counter("requests", r.end, "running", values[0], "waiting", values[1]);
  if (values[2] != counters_[2] || values[3] != counters_[3])
    counter("kv blocks", r.end, "used", values[2], "free", values[3]);
  if (values[4] != counters_[4] || values[5] != counters_[5])
    counter("tokens per step", r.start, "prefill", values[4], "decode", values[5]);
  std::copy(std::begin(values), std::end(values), counters_);
}

void ChromeTrace::close() {
  if (!file_) return;
  detach();
  std::fputs("\n]\n", file_);
  bytes_ += 3;
  const bool failed = std::ferror(file_) != 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  check(!failed && closed, "--trace ", path_, ": writing failed (disk full?)");
}

std::string ChromeTrace::summary() const {
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.1f", static_cast<double>(bytes_) / (1 << 20));
  return path_ + ": " + std::to_string(events_) + " trace events, " + std::to_string(runs_) + " engine run" +
         (runs_ == 1 ? "" : "s") + ", " + mib + " MiB" +
         (truncated_ ? ", truncated at " + truncated_at_ + " (the cap)" : "") +
         "; open it in https://ui.perfetto.dev or the dashboard page";
}

}  // namespace servelab
