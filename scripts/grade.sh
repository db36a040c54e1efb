#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Grades the labs: installs and builds as the Quick start does, then runs each lab's labelled tests and
# prints a score table (tools/grade.py; its options, e.g. `--labs 04 --json report.json`, pass through).
# With --answers FILE it only checks a file of answers against the saved key: no install, no build, so it
# works in any copy of the tree. Exit 0 when every graded test passed (or every answer is right).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for arg in "$@"; do
  case "$arg" in
    --answers | --answers=*) exec python3 "$root/tools/grade.py" "$@" ;;
  esac
done
"$root/scripts/setup.sh"
python3 "$root/tools/grade.py" --build "$root/build" "$@"
