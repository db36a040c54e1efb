// SPDX-License-Identifier: MIT
/**
 * @file trace.h
 * @brief `--trace FILE` for the labs that run the engine: every engine run a
 *        lab serves through serve_workload() (or a TraceScope of its own)
 *        becomes one process in one Chrome trace (trace/chrome_trace.h).
 *
 * A lab's main() registers the flags with add_trace_options(app); the file is
 * opened when the flags are parsed (an unwritable path is a flag error, before
 * any work) and closed when the process ends, with one summary line on stderr.
 */
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "serve/engine.h"

namespace servelab::lab {

/// Registers --trace FILE and --trace-max-mb on @p app.
void add_trace_options(CLI::App& app);

/// Opens the file --trace names (the parse does, through add_trace_options()); nothing without --trace.
/// @throws Error naming --trace or --trace-max-mb when the file cannot be written or the cap is too small.
void start_trace();

/// Ends the trace and prints its summary on stderr (at exit, or earlier when called); nothing without --trace.
void finish_trace();

/// Attaches @p engine to the lab's trace for the scope's life (nothing without --trace).
class TraceScope {
 public:
  /// @param label names the run in the trace; empty = the engine's policy, budget and KV blocks.
  explicit TraceScope(Engine& engine, const std::string& label = {});
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  bool attached_ = false;
};

/// "continuous, 16 seqs, 2048-token budget, chunked, 512 KV blocks of 16": what a run's label says by default.
std::string describe_engine(const Engine& engine);

}  // namespace servelab::lab
