#!/bin/sh
# SPDX-License-Identifier: MIT
# lab 07 given a --servelab that is not the servelab executable (a missing file, a folder, a file that is
# not executable) must stop at once with one error naming the flag and the path, before it starts a
# router that cannot run. Each run is under `timeout`, so a hang fails the test.
# Usage: lab07_servelab_flag_test.sh LAB07
set -u
lab=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$work/plain"
for bad in "$work/no-such-servelab" "$work" "$work/plain"; do
  timeout 60 "$lab" --quick --out "$work/results" --servelab "$bad" > "$work/out" 2> "$work/err"
  rc=$?
  [ "$rc" -eq 1 ] || { echo "FAIL: exit status $rc (124: it hung), expected 1: --servelab $bad"; cat "$work/err"; exit 1; }
  grep -q -- "--servelab $bad: .*expected the servelab executable" "$work/err" ||
    { echo "FAIL: stderr does not name --servelab $bad:"; cat "$work/err"; exit 1; }
done
echo "PASS"
