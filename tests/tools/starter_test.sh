#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The student starter tree (ctest tools.starter, label "starter"): made from the
# reference with one lab's solutions stubbed (the last marked lab, or LAB), it
# builds, that lab's tests fail and earn at most 10% of its points, and every
# earlier lab's tests pass. Only that lab and the earlier ones are built and
# graded: each lab's tests depend on its own executable alone, and a course
# hands the labs out in order. The tree is built with the release preset in
# TREE/build, so ccache (with base_dir set) serves every file the stubs did not
# change. It is not in the default test run: configure with
# -DSERVELAB_STARTER_TEST=ON. Usage: starter_test.sh <repo root> <scratch dir> [LAB]
set -euo pipefail
root=$1 work=$2
last=${3:-$(python3 "$root/tools/make_starter.py" "$root" --list | awk '{print $2}' | sort -u | tail -1)}
rm -rf "$work" && mkdir -p "$work"
python3 "$root/tools/make_starter.py" "$root" "$work/tree" --labs "$last"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
(cd "$work/tree" && cmake -S . --preset release "${launcher[@]}" >/dev/null)
targets=() labs=()
for lab in "$work"/tree/labs/[0-9][0-9]_*/; do
  name=$(basename "$lab")
  [[ ${name:0:2} > $last ]] && continue
  targets+=("lab_$name" "lab${name:0:2}_tests")
  labs+=("${name:0:2}")
done
cmake --build "$work/tree/build" -j2 --target "${targets[@]}" >/dev/null
status=0
python3 "$root/tools/grade.py" --build "$work/tree/build" --labs "$(IFS=,; echo "${labs[*]}")" \
  --json "$work/grade.json" || status=$?
python3 - "$work/grade.json" "$last" "$status" <<'PY'
import json, sys
report, last, status = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
problems = []
for lab in report["labs"]:
    failed = "; ".join(t["name"] for t in lab["results"] if t["result"] == "failed")
    if lab["lab"] < last and (lab["failed"] or not lab["passed"]):
        problems.append(f"lab {lab['lab']} (before the stubbed lab {last}) has {lab['failed']} failing test(s): {failed}")
    if lab["lab"] == last:
        print(f"starter_test: stubbed lab {last} earns {lab['points']} of {lab['possible']} points")
        if not lab["failed"]:
            problems.append(f"lab {last}'s solutions are stubbed, yet none of its tests failed")
        if lab["points"] > 0.10 * lab["possible"]:
            problems.append(f"lab {last} with every region stubbed earns more than 10% of its points")
if status != 1:
    problems.append(f"grade.py exited {status}, expected 1 (a lab failing)")
for p in problems:
    print("starter_test:", p)
print(f"starter_test: stubbed lab {last}; {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
PY
