#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Quick start, command 2: install, build, and run every test; exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
ctest --test-dir "$root/build" -j2 --output-on-failure "$@"
