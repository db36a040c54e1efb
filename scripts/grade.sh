#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Grades the labs: installs and builds as the Quick start does, then runs each
# lab's labelled tests and prints a score table (tools/grade.py; its options,
# e.g. `--labs 04 --json report.json`, pass through). Exit 0 when every graded test passed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
python3 "$root/tools/grade.py" --build "$root/build" "$@"
