// SPDX-License-Identifier: MIT
#include "trace.h"

#include <iostream>
#include <memory>

#include "cli/trace_flags.h"
#include "core/error.h"

namespace servelab::lab {

namespace {

// One trace per lab process: the flags fill it, the parse opens the file, the process's end closes it.
struct LabTrace {
  cli::TraceFlags flags;
  std::unique_ptr<ChromeTrace> trace;
  // A lab that fails still leaves a valid file: the JSON is ended at exit whatever happened.
  ~LabTrace() {
    try {
      if (trace) trace->close(), std::cerr << "trace: " << trace->summary() << "\n";
    } catch (const Error& e) {
      std::cerr << "trace: " << e.what() << "\n";
    }
  }
};

LabTrace& lab_trace() {
  static LabTrace t;
  return t;
}

}  // namespace

void add_trace_options(CLI::App& app) {
  cli::add_trace_flags(app, lab_trace().flags);
  // Opened as the flags are parsed: an unwritable path is a flag error, before any work.
  app.parse_complete_callback([] {
    try {
      start_trace();
    } catch (const Error& e) {
      throw CLI::ValidationError(e.what());
    }
  });
}

void start_trace() { lab_trace().trace = cli::open_trace(lab_trace().flags); }

void finish_trace() {
  LabTrace& t = lab_trace();
  if (!t.trace) return;
  t.trace->close();
  std::cerr << "trace: " << t.trace->summary() << "\n";
  t.trace.reset();
}

std::string describe_engine(const Engine& engine) {
  const EngineConfig& c = engine.config();
  return std::string(to_string(c.scheduler.policy)) + ", " + std::to_string(c.scheduler.max_num_seqs) + " seqs, " +
         std::to_string(c.scheduler.max_num_batched_tokens) + "-token budget" +
         (c.scheduler.enable_chunked_prefill ? ", chunked" : "") + ", " + std::to_string(engine.num_blocks()) +
         " KV blocks of " + std::to_string(c.block_size);
}

TraceScope::TraceScope(Engine& engine, const std::string& label) {
  ChromeTrace* trace = lab_trace().trace.get();
  if (!trace) return;
  trace->attach(engine, label.empty() ? describe_engine(engine) : label);
  attached_ = true;
}

TraceScope::~TraceScope() {
  if (ChromeTrace* trace = lab_trace().trace.get(); attached_ && trace) trace->detach();
}

}  // namespace servelab::lab
