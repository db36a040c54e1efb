/**
 * @file disagg_commands.h
 * @brief `servelab router` and `servelab worker` (lab 07): flag parsing for
 *        engine/disagg/router.h and engine/disagg/worker.h.
 */
#pragma once

#include <CLI/CLI.hpp>

namespace servelab {

/// The two subcommands, registered on the application.
struct DisaggCommands {
  CLI::App* router = nullptr;  ///< `servelab router`
  CLI::App* worker = nullptr;  ///< `servelab worker`
  /// Runs whichever was parsed; returns the exit status, or -1 when neither was.
  int run() const;
};

/// Adds `router` and `worker` to @p app.
DisaggCommands add_disagg_commands(CLI::App& app);

}  // namespace servelab
