#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The student starter tree (ctest tools.starter, label "starter"): made from the
# reference with the last marked lab's solutions stubbed, it builds, that lab's
# tests fail, and every earlier lab's tests pass. A later lab may build on the
# stubbed one (lab 07's workers schedule with lab 06's chunks): its failures are
# listed, not counted; a course hands the labs out in order. It builds a whole second tree
# (the labs and their tests), so it is not in the default test run: configure
# with -DSERVELAB_STARTER_TEST=ON. Usage: starter_test.sh <repo root> <scratch dir>
set -euo pipefail
root=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
last=$(python3 "$root/tools/make_starter.py" "$root" --list | awk '{print $2}' | sort -u | tail -1)
python3 "$root/tools/make_starter.py" "$root" "$work/tree" --labs "$last"
cmake -S "$work/tree" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DSERVELAB_CUDA=OFF -DSERVELAB_WERROR=OFF >/dev/null
targets=()
for lab in "$work"/tree/labs/[0-9][0-9]_*/; do
  name=$(basename "$lab")
  targets+=("lab_$name" "lab${name:0:2}_tests")
done
cmake --build "$work/build" -j2 --target "${targets[@]}" >/dev/null
status=0
python3 "$root/tools/grade.py" --build "$work/build" --json "$work/grade.json" || status=$?
python3 - "$work/grade.json" "$last" "$status" <<'PY'
import json, sys
report, last, status = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
problems = []
for lab in report["labs"]:
    failed = "; ".join(t["name"] for t in lab["results"] if t["result"] == "failed")
    if lab["lab"] < last and (lab["failed"] or not lab["passed"]):
        problems.append(f"lab {lab['lab']} (before the stubbed lab {last}) has {lab['failed']} failing test(s): {failed}")
    if lab["lab"] > last and lab["failed"]:
        print(f"starter_test: note: lab {lab['lab']} builds on lab {last}; failing without it: {failed}")
    if lab["lab"] == last and not lab["failed"]:
        problems.append(f"lab {last}'s solutions are stubbed, yet none of its tests failed")
if status != 1:
    problems.append(f"grade.py exited {status}, expected 1 (a lab failing)")
for p in problems:
    print("starter_test:", p)
print(f"starter_test: stubbed lab {last}; {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
PY
