// SPDX-License-Identifier: MIT
/**
 * @file main.cpp
 * @brief `servelab`: the engine's command-line front end.
 *
 *   servelab generate [--preset NAME | --model DIR] [--prompt TEXT | --chat MESSAGE | --prompt-ids 1,2,3 | --prompt-len N] ...   (generate.cpp)
 *   servelab tokenize (--model DIR | --tokenizer FILE) (--text TEXT | --file F)   (tokenize.cpp)
 *   servelab presets                                                           (presets.cpp)
 *   servelab serve (--preset NAME | --model DIR) [--host H] [--port N] [engine flags]   (serve.cpp)
 *   servelab bench serve [--host H] [--port N] [--request-rate R] [--max-concurrency C] ...   (bench.cpp)
 *   servelab router [--control tcp://127.0.0.1:0] [--endpoint-file F]          (router.cpp, lab 07)
 *   servelab worker --role prefill|decode|both --router tcp://HOST:PORT ...     (worker.cpp, lab 07)
 *
 * Each command registers itself in the shape of command.h; this file only
 * dispatches. The model flags are cli/model_flags.h's, the same in every
 * command that loads a model, every lab and the workers.
 *
 * Results go to stdout, diagnostics to stderr; any bad input prints one
 * `servelab: error: ...` line and exits with status 1 before any output.
 * Generated text streams to stdout as tokens arrive, so everything that can
 * be wrong with a request is checked before the first token is printed.
 */
#include <CLI/CLI.hpp>

#include <iostream>
#include <new>
#include <vector>

#include "command.h"
#include "core/error.h"

int main(int argc, char** argv) {
  using namespace servelab::cli;
  CLI::App app{"servelab: a teaching LLM serving engine"};
  // Flag errors look like every other error: one line, the same prefix.
  app.failure_message(
      [](const CLI::App*, const CLI::Error& e) { return "servelab: error: " + std::string(e.what()) + "\n"; });
  app.require_subcommand(1);
  const std::vector<Command> commands = {add_generate_command(app), add_tokenize_command(app), add_presets_command(app),
                                         add_serve_command(app),    add_bench_command(app),    add_router_command(app),
                                         add_worker_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; every flag error exits 1, like every other bad input.
    return app.exit(e) == 0 ? 0 : 1;
  }
  try {
    for (const Command& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const servelab::Error& e) {
    std::cout.flush();
    std::cerr << "servelab: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "servelab: error: out of memory (try a smaller --preset or --prompt-len)\n";
    return 1;
  } catch (const std::exception& e) {
    // Anything else (a system error from the OS, a library's exception) still ends as one line and exit 1.
    std::cerr << "servelab: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
