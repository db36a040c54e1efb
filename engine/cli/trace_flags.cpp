// SPDX-License-Identifier: MIT
#include "cli/trace_flags.h"

#include <CLI/CLI.hpp>

#include "core/error.h"

namespace servelab::cli {

void add_trace_flags(CLI::App& app, TraceFlags& flags) {
  app.add_option("--trace", flags.path,
                 "write every engine step and request phase to FILE as a Chrome trace (open it in ui.perfetto.dev, "
                 "chrome://tracing or servelab serve's /dashboard)");
  app.add_option("--trace-max-mb", flags.max_mb, "stop adding to --trace once the file reaches this many MiB")
      ->capture_default_str();
}

std::unique_ptr<ChromeTrace> open_trace(const TraceFlags& flags) {
  if (flags.path.empty()) return nullptr;
  check(flags.max_mb >= 1 && flags.max_mb <= 1 << 20, "--trace-max-mb must be in [1, 1048576], got ", flags.max_mb);
  return std::make_unique<ChromeTrace>(flags.path, static_cast<std::size_t>(flags.max_mb * (1 << 20)));
}

}  // namespace servelab::cli
