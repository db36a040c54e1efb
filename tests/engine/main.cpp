// SPDX-License-Identifier: MIT
// main() of the engine, lab and server test executables.
#include "catch_session.h"

int main(int argc, char** argv) { return servelab::test::run_catch(argc, argv); }
