// SPDX-License-Identifier: MIT
/**
 * @file catch_session.h
 * @brief Runs Catch2 for every test executable from one compiled copy of its
 *        implementation (tests/catch_session.cpp).
 */
#pragma once

namespace servelab::test {

/// Runs the registered Catch2 tests with the command line @p argc / @p argv; returns Catch2's exit code.
int run_catch(int argc, char** argv);

}  // namespace servelab::test
