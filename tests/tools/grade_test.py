# SPDX-License-Identifier: MIT
"""Tests tools/grade.py on JUnit files of known outcome (ctest label 'tools').

Usage: python3 tests/tools/grade_test.py <repo root>
Each case writes labNN.xml files as `ctest --output-junit` does, runs the
grader on them with --junit-dir, and checks its exit status and JSON report.
"""
import json
import pathlib
import subprocess
import sys
import tempfile

root = pathlib.Path(sys.argv[1])
grade = root / "tools" / "grade.py"
failures = []


def junit(cases):
    body = "".join(
        f'<testcase name="{name}" classname="x" time="0.5" status="{status}">{inner}</testcase>'
        for name, status, inner in cases)
    return f'<?xml version="1.0" encoding="UTF-8"?><testsuite name="servelab" tests="{len(cases)}">{body}</testsuite>'


PASS = ("run", "")
FAIL = ("fail", '<failure message="Failed"/><system-out>' + "x" * 5000 + 'REQUIRE( ok ) failed</system-out>')
SKIP = ("notrun", '<skipped message="Skipped"/>')


def run(files, points, labs):
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        for lab, cases in files.items():
            (d / f"lab{lab}.xml").write_text(junit([(name, *kind) for name, kind in cases]))
        (d / "points.json").write_text(json.dumps(points))
        r = subprocess.run([sys.executable, str(grade), "--junit-dir", str(d), "--labs", labs, "--points",
                            str(d / "points.json"), "--json", str(d / "report.json")], capture_output=True, text=True)
        report = json.loads((d / "report.json").read_text()) if (d / "report.json").is_file() else None
        return r, report


def expect(what, condition, detail=""):
    if not condition:
        failures.append(f"{what} {detail}")


points = {"default": 1, "tests": {"end to end": 3}}
# Every test passes: exit 0, full marks, a skipped test neither earns nor costs.
r, rep = run({"01": [("end to end", PASS), ("refuses", PASS), ("plots", SKIP)]}, points, "01")
expect("all passing exits 0", r.returncode == 0, r.stdout + r.stderr)
expect("all passing scores 4 / 4", rep and (rep["points"], rep["possible"]) == (4, 4), rep)
expect("the skipped test is listed", rep and rep["labs"][0]["skipped"] == 1, rep)
# One failure: exit 1, its points lost, its name printed.
r, rep = run({"01": [("end to end", FAIL), ("refuses", PASS)], "02": [("x", PASS)]}, points, "1,2")
expect("a failure exits 1", r.returncode == 1, r.stdout)
expect("a failure loses its points", rep and (rep["points"], rep["possible"]) == (2, 5), rep)
expect("a failure is named", "failed: lab 01: end to end" in r.stdout, r.stdout)
tests = {t["name"]: t for t in rep["labs"][0]["results"]} if rep else {}
expect("a failure keeps the tail of its output", tests and tests["end to end"].get("output", "").endswith(
    "REQUIRE( ok ) failed") and len(tests["end to end"]["output"]) <= 4000,
       tests and tests["end to end"].get("output", "")[-100:])
expect("a pass keeps no output", tests and "output" not in tests["refuses"], tests)
# A lab with no test result at all fails: an unbuilt lab must not score as passed.
r, rep = run({"01": [("end to end", PASS)]}, points, "1,2")
expect("a lab with no tests exits 1", r.returncode == 1, r.stdout)
# Bad usage: an unknown lab, a malformed points file.
r, _ = run({}, points, "99")
expect("an unknown lab exits 2 naming --labs", r.returncode == 2 and "--labs" in r.stderr, r.stderr)
r, _ = run({"01": [("a", PASS)]}, {"default": -1}, "01")
expect("negative points exit 2 naming --points", r.returncode == 2 and "--points" in r.stderr, r.stderr)

for f in failures:
    print("FAILED:", f)
print(f"grade_test: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
