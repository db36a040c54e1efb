// SPDX-License-Identifier: MIT
/**
 * @file command.h
 * @brief The `servelab` subcommands, each in a file of its own, in one shape:
 *        add_X_command() registers the subcommand and its flags on the
 *        application and returns what runs it once the flags are parsed.
 *        main.cpp only dispatches.
 */
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace servelab::cli {

/// A registered subcommand.
struct Command {
  CLI::App* app = nullptr;   ///< the subcommand (parsed() says whether it was chosen); owned by the application
  std::function<int()> run;  ///< runs it after a successful parse; returns the exit status, throws Error on bad input
};

/// `servelab generate`: tokens after a prompt, with prefill/decode timings (generate.cpp).
Command add_generate_command(CLI::App& app);
/// `servelab tokenize`: a text's token ids and pieces (tokenize.cpp).
Command add_tokenize_command(CLI::App& app);
/// `servelab presets`: the named model shapes (presets.cpp).
Command add_presets_command(CLI::App& app);
/// `servelab serve`: the OpenAI-compatible HTTP server (serve.cpp).
Command add_serve_command(CLI::App& app);
/// `servelab bench serve`: load a running server as `vllm bench serve` does (bench.cpp).
Command add_bench_command(CLI::App& app);
/// `servelab router`: lab 07's control-plane hub (router.cpp).
Command add_router_command(CLI::App& app);
/// `servelab worker`: a lab 07 prefill, decode or colocated worker (worker.cpp).
Command add_worker_command(CLI::App& app);

}  // namespace servelab::cli
