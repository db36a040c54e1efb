/**
 * @file serve.h
 * @brief `servelab serve` and `servelab bench serve`: the subcommands that
 *        start the OpenAI-compatible server (engine/http/http_server.h) and
 *        its benchmark client (engine/loadgen/bench_client.h).
 */
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace servelab::cli {

/**
 * @brief Adds `serve` to @p app.
 * @return what runs it once the flags are parsed (its exit status).
 */
std::function<int()> add_serve_command(CLI::App& app, CLI::App*& command);

/**
 * @brief Adds `bench serve` to @p app.
 * @return what runs it once the flags are parsed (its exit status).
 */
std::function<int()> add_bench_command(CLI::App& app, CLI::App*& command);

}  // namespace servelab::cli
