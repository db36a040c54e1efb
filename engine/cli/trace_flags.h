// SPDX-License-Identifier: MIT
/**
 * @file trace_flags.h
 * @brief `--trace FILE` and `--trace-max-mb`, declared once for the labs,
 *        `servelab generate` and `servelab serve` (trace/chrome_trace.h).
 */
#pragma once

#include <memory>
#include <string>

#include "trace/chrome_trace.h"

namespace CLI {
class App;
}  // namespace CLI

namespace servelab::cli {

/// The flags' values, as typed.
struct TraceFlags {
  std::string path{};  ///< --trace: the Chrome trace to write; empty = none
  double max_mb = static_cast<double>(ChromeTrace::kDefaultMaxBytes >> 20);  ///< --trace-max-mb: the file's cap, MiB
};

/// Registers --trace and --trace-max-mb on @p app, writing into @p flags (which must outlive parsing).
void add_trace_flags(CLI::App& app, TraceFlags& flags);

/**
 * @brief The trace @p flags ask for, its file created; null without --trace.
 * @throws Error naming --trace-max-mb when it is outside [1, 1048576], or --trace when the file cannot be written.
 */
std::unique_ptr<ChromeTrace> open_trace(const TraceFlags& flags);

}  // namespace servelab::cli
