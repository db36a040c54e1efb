# SPDX-License-Identifier: MIT
"""Tests tools/compare_results.py on constructed results JSONs (ctest label 'tools').

Usage: python3 tests/tools/compare_results_test.py <repo root>
A reference run, then "student" runs made from it: the same numbers, a
machine twice as fast, and one changed value of each kind; each must be
told apart (exit 1, the value named, by how much) or let through (exit 0).
"""
import copy
import importlib.util
import json
import pathlib
import subprocess
import sys
import tempfile

root = pathlib.Path(sys.argv[1])
tool = root / "tools" / "compare_results.py"
spec = importlib.util.spec_from_file_location("compare_results", tool)
compare_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_results)
failures = []


def expect(what, condition, detail=""):
    if not condition:
        failures.append(f"{what} {detail}")


REFERENCE = {
    "lab": "04_paged_attention",
    "machine": {"cpu": "reference CPU"},
    "tables": [
        {"name": "serving",
         "columns": ["policy", "output tok/s", "vs one at a time", "TTFT p50 [ms]", "steps", "max err vs v0",
                     "bound here", "tokens hash"],
         "rows": [["one_at_a_time", 100.0, 1.0, 900.0, 300, 2e-7, "memory", "0ffd81e6"],
                  ["static", 300.0, 3.0, 300.0, 48, 3e-7, "memory", "0ffd81e6"],
                  ["continuous", 400.0, 4.0, 200.0, 33, 1e-7, "compute", "0ffd81e6"]]},
        {"name": "bytes", "columns": ["version", "bytes [MiB]"], "rows": [["v1", 3640.0], ["v3", 266.0]]},
    ],
    "claims": [{"id": "04.same_tokens", "held": True, "evidence": "one hash"}],
}


def run(student, reference=REFERENCE, extra=()):
    with tempfile.TemporaryDirectory() as d:
        s, r = pathlib.Path(d) / "student.json", pathlib.Path(d) / "reference.json"
        s.write_text(student if isinstance(student, str) else json.dumps(student))
        r.write_text(json.dumps(reference))
        return subprocess.run([sys.executable, str(tool), str(s), str(r), *extra], capture_output=True, text=True,
                              timeout=60)


def changed(table, row, column, value):
    student = copy.deepcopy(REFERENCE)
    t = next(t for t in student["tables"] if t["name"] == table)
    t["rows"][row][t["columns"].index(column)] = value
    return student


# The same run, and a machine twice as fast (every time halved, every rate doubled), agree.
r = run(REFERENCE)
expect("the same results exit 0", r.returncode == 0 and "0 differ" in r.stdout, r.stdout + r.stderr)
faster = copy.deepcopy(REFERENCE)
for row in faster["tables"][0]["rows"]:
    row[1], row[3] = row[1] * 2, row[3] / 2
faster["machine"]["cpu"] = "a faster CPU"
r = run(faster)
expect("a machine twice as fast agrees", r.returncode == 0, r.stdout)
# What a machine decides is not compared: the bound measured here.
r = run(changed("serving", 0, "bound here", "compute"))
expect("a machine's own bound is not compared", r.returncode == 0, r.stdout)
# Numerical errors need only be of the same order.
r = run(changed("serving", 1, "max err vs v0", 9e-7))
expect("an error of the same order agrees", r.returncode == 0, r.stdout)
r = run(changed("serving", 1, "max err vs v0", 1e-2))
expect("an error 10,000x larger differs", r.returncode == 1 and "max err vs v0" in r.stdout, r.stdout)

# Each kind of difference is found, named and sized.
for student, words in [
    (changed("serving", 2, "tokens hash", "deadbeef"), "row 'continuous', tokens hash: 'deadbeef' vs '0ffd81e6'"),
    (changed("serving", 1, "steps", 49), "row 'static', steps: 49 vs 48 (exact)"),
    (changed("bytes", 1, "bytes [MiB]", 266.5), "table bytes, row 'v3', bytes [MiB]: 266.5 vs 266 (exact)"),
    (changed("serving", 2, "vs one at a time", 2.8), "row 'continuous', vs one at a time: 2.8 vs 4 (-30%)"),
    # static's TTFT alone doubles: 600 of the column's largest 900 against 300 of 900
    (changed("serving", 1, "TTFT p50 [ms]", 600.0), "row 'static', TTFT p50 [ms]: 0.6667 vs 0.3333 of the "
                                                     "column's largest (+100%)"),
]:
    r = run(student)
    expect(f"finds {words!r}", r.returncode == 1 and words in r.stdout and "1 differ" in r.stdout, r.stdout)
r = run(changed("serving", 2, "vs one at a time", 3.4))
expect("a ratio 15% off is within the default 25%", r.returncode == 0, r.stdout)
r = run(changed("serving", 2, "vs one at a time", 3.4), extra=["--tolerance", "0.1"])
expect("and not within --tolerance 0.1", r.returncode == 1 and "(-15%)" in r.stdout, r.stdout)
# A missing row, table or claim, and a claim that did not hold.
student = copy.deepcopy(REFERENCE)
del student["tables"][0]["rows"][1]
r = run(student)
expect("a missing row is named", r.returncode == 1 and "row 'static' missing" in r.stdout, r.stdout)
student = copy.deepcopy(REFERENCE)
del student["tables"][1]
student["claims"][0]["held"] = False
r = run(student)
expect("a missing table is named", "table bytes: missing" in r.stdout, r.stdout)
expect("a claim that did not hold is named", r.returncode == 1 and "claim 04.same_tokens: held False vs True"
       in r.stdout, r.stdout)

# Bad input: one error naming the file, exit 2.
r = run("{not json")
expect("a file that is not JSON exits 2 naming it", r.returncode == 2 and "student.json" in r.stderr
       and r.stderr.count("\n") == 1, r.stderr)
r = run({"lab": "04", "tables": [{"name": "t"}]})
expect("a JSON that is not a lab's results exits 2", r.returncode == 2 and "expected a lab's results" in r.stderr,
       r.stderr)
r = run(dict(REFERENCE, lab="05_flash_attention"))
expect("two different labs exit 2", r.returncode == 2 and "same lab" in r.stderr, r.stderr)
r = run(REFERENCE, extra=["--tolerance", "-1"])
expect("a negative tolerance exits 2 naming it", r.returncode == 2 and "--tolerance" in r.stderr, r.stderr)

# The chapters' own headers get the kind their numbers need.
for header, kind in [("tokens hash", "exact"), ("bytes [MiB]", "exact"), ("intensity [FLOP/B]", "exact"),
                     ("GFLOP", "exact"), ("KV blocks used", "exact"), ("free after B [tokens]", "exact"),
                     ("TTFT p50 [ms]", "scaled"), ("time [us]", "scaled"), ("output tok/s", "scaled"),
                     ("GB/s", "scaled"), ("achieved GFLOP/s", "scaled"), ("goodput [req/s]", "scaled"),
                     ("speedup", "ratio"), ("vs one at a time", "ratio"), ("simulated / wall", "ratio"),
                     ("busy [%]", "ratio"), ("error", "ratio"), ("TPOT p99 error [%]", "ratio"),
                     ("max err vs v0", "error"), ("max err v3 vs v2", "error"), ("bound here", "machine"),
                     ("no cache min/max [s]", "machine"), ("meets SLO", "machine")]:
    expect(f"{header!r} is compared as {kind}", compare_results.kind_of(header) == kind,
           compare_results.kind_of(header))

for f in failures:
    print("FAILED:", f)
print(f"compare_results_test: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
