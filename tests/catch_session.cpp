// SPDX-License-Identifier: MIT
// Catch2 v2's implementation, compiled once and linked into every test executable: it is the
// slowest file of the build (about 25 s, a minute under ASan), and each main() only calls run_catch().
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.h"

namespace servelab::test {

int run_catch(int argc, char** argv) { return Catch::Session().run(argc, argv); }

}  // namespace servelab::test
