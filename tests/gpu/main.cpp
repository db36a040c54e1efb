// SPDX-License-Identifier: MIT
// The GPU tests' main(): with no CUDA device every test reports SKIP (exit
// code 77, which CMake registers as SKIP_RETURN_CODE), never PASS. Listing the
// tests (ctest's discovery at build time) works on any machine.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "catch_session.h"
#include "cuda/device_probe.h"

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).rfind("--list", 0) == 0;
  if (!listing && servelab::cuda_device_count() == 0) {
    std::printf("SKIP: no CUDA device (%s)\n", servelab::cuda_device_summary().c_str());
    return 77;
  }
  // Every device buffer and new KV cache starts as NaN, so an element a kernel
  // forgets to write (or reads before anyone wrote it) fails the comparison.
  setenv("SERVELAB_CUDA_POISON", "1", 1);
  return servelab::test::run_catch(argc, argv);
}
