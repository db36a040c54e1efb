# SPDX-License-Identifier: MIT
"""Grades the labs: runs each lab's labelled tests (ctest -L labNN) and scores them.

Usage: python3 tools/grade.py [--build build] [--labs all|01,04] [--json report.json]
                              [--points tests/labs/points.json] [--junit-dir DIR] [--hidden DIR]
       python3 tools/grade.py --answers FILE [--key key.json] [--reveal] [--labs ...] [--json ...]

Prints one row per lab (tests passed, points earned of points possible) and
writes a JSON report with every test's outcome, for an instructor to collect
(a failed test's entry keeps the tail of what it printed, under "output").
Points per test come from one file, tests/labs/points.json ("default" for
every test, "tests" for the exceptions, by ctest test name; a test worth 0
is run and listed but ungraded: it checks code the student does not write). A skipped test
(ctest's SKIP, e.g. plots without matplotlib) earns nothing and costs
nothing; it is listed. A test that runs past TEST_TIMEOUT seconds (a stuck
loop, say; a test's own TIMEOUT property, where it has one, comes first)
fails. Exit status: 0 when every graded test passed, 1 when
one failed or a lab has no test, 2 on bad usage.

--hidden DIR adds an instructor's hidden tests (tests/labs/hidden/ in the
reference; a starter tree has no copy): it reconfigures the build with
-DSERVELAB_HIDDEN_TESTS=DIR, builds DIR's labNN_hidden_tests for the selected
labs, and grades them with each lab, at the points of DIR/points.json (same
format as --points).

--junit-dir reads labNN.xml files already written by
`ctest --output-junit` instead of running ctest (how the grader's own test
feeds it known outcomes).

--answers FILE checks a learner's answers to the chapters' questions
instead of running tests (tools/answers.py describes the file: one
`id = number` a line): one row per question of the selected labs, right,
wrong or missing, and the same in the JSON report. It builds and runs
nothing: the key is the one the engine computed, saved in
tests/labs/answers_key.json, or --key FILE (another saved answer_key
output, e.g. an instructor's reference key for a student's tree). The
expected number is shown only for a right answer; --reveal shows every
one. Exit status 0 when every answer is right, 1 when one is wrong or
missing, 2 on a malformed file (the message names its line).
"""
import argparse
import atexit
import datetime
import json
import pathlib
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import answers as answer_file

# The labs are the folders labs/NN_*: a new lab is graded as soon as it exists.
LABS = sorted(p.name[:2] for p in (pathlib.Path(__file__).resolve().parent.parent / "labs").glob("[0-9][0-9]_*"))


def fail_usage(message):
    print(f"grade.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse_labs(text):
    if text == "all":
        return LABS
    labs = [part.strip().zfill(2) for part in text.split(",") if part.strip()]
    for lab in labs:
        if lab not in LABS:
            fail_usage(f"--labs: unknown lab {lab!r}; expected 'all' or numbers from {LABS[0]} to {LABS[-1]}")
    return labs


def load_points(path):
    try:
        points = json.loads(pathlib.Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        fail_usage(f"--points {path}: {e}")
    default, tests = points.get("default"), points.get("tests", {})
    if not isinstance(default, int) or default < 0 or not isinstance(tests, dict) or \
            any(not isinstance(v, int) or v < 0 for v in tests.values()):
        fail_usage(f"--points {path}: expected {{\"default\": N, \"tests\": {{\"test name\": N}}}} with whole N >= 0")
    return default, tests


def add_hidden(build, hidden, labs):
    """Builds the hidden tests of @p labs from folder @p hidden into @p build; returns their (default, points)."""
    hidden = pathlib.Path(hidden).resolve()
    if not (hidden / "CMakeLists.txt").is_file():
        fail_usage(f"--hidden {hidden}: expected a folder with CMakeLists.txt and labNN_hidden_test.cpp files")
    cache = pathlib.Path(build) / "CMakeCache.txt"
    home = next((line.split("=", 1)[1].strip() for line in cache.read_text().splitlines()
                 if line.startswith("CMAKE_HOME_DIRECTORY:")), None) if cache.is_file() else None
    if home is None:
        fail_usage(f"--build {build}: not a configured build folder (run scripts/setup.sh first)")
    subprocess.run(["cmake", "-S", home, "-B", str(build), f"-DSERVELAB_HIDDEN_TESTS={hidden}"],
                   stdout=subprocess.DEVNULL, check=True)
    # Afterwards the build forgets the folder again, so a plain ctest run does not list hidden tests.
    atexit.register(subprocess.run, ["cmake", "-S", home, "-B", str(build), "-DSERVELAB_HIDDEN_TESTS="],
                    stdout=subprocess.DEVNULL, check=False)
    targets = [f"lab{lab}_hidden_tests" for lab in labs if (hidden / f"lab{lab}_hidden_test.cpp").is_file()]
    if targets:
        subprocess.run(["cmake", "--build", str(build), "-j2", "--target", *targets], stdout=subprocess.DEVNULL,
                       check=True)
    return load_points(hidden / "points.json") if (hidden / "points.json").is_file() else (0, {})


OUTPUT_TAIL = 4000  # characters of a failed test's output kept in the report: its failing checks, not its whole log


def outcomes(junit_file):
    """(test name, 'passed' | 'failed' | 'skipped', seconds, output) for each testcase of a CTest JUnit file;
    output is the tail of what a failed test printed, "" for the others."""
    root = ET.parse(junit_file).getroot()
    for case in root.iter("testcase"):
        output = ""
        if case.find("failure") is not None or case.find("error") is not None or case.get("status") == "fail":
            result = "failed"
            output = (case.findtext("system-out") or "")[-OUTPUT_TAIL:]
        elif case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            result = "skipped"
        else:
            result = "passed"
        yield case.get("name"), result, float(case.get("time") or 0), output


TEST_TIMEOUT = 300  # s: 5 to 20 times the slowest reference test on a 2-core laptop; ctest's own default is 1500


def run_ctest(build, lab, junit_file):
    # Failures are read from the JUnit file; ctest's own exit status only repeats them.
    subprocess.run(["ctest", "--test-dir", str(build), "-L", f"^lab{lab}$", "-j2", "--timeout", str(TEST_TIMEOUT),
                    "--output-junit", str(junit_file)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)


def grade_answers(args, labs):
    try:
        questions = answer_file.load_key(args.key)
        given = answer_file.read_answers(args.answers, {q["id"] for q in questions})
    except answer_file.AnswersError as e:
        fail_usage(str(e))
    rows = answer_file.check([q for q in questions if f"{q['lab']:02d}" in labs], given, reveal=args.reveal)
    print("| question | lab | answer | expected | tolerance | result |")
    print("|---|---:|---:|---:|---:|---|")
    for r in rows:
        shown = "" if r["given"] is None else f"{r['given']:.6g}"
        expected = f"{r['expected']:.6g}" if "expected" in r else ""
        tolerance = f"{r['rel_tolerance']:.0%}" if r["rel_tolerance"] else "exact"
        print(f"| {r['id']} | {r['lab']:02d} | {shown} | {expected} | {tolerance} | {r['result']} |")
    right = sum(r["result"] == "right" for r in rows)
    print(f"\nanswers: {right} of {len(rows)} right")
    if right < len(rows) and not args.reveal:
        print("(the expected number is shown for right answers only; --reveal shows them all)")
    report = {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
              "answers": str(args.answers), "questions": rows, "right": right, "total": len(rows),
              "all_right": right == len(rows) and len(rows) > 0}
    if args.json_out:
        pathlib.Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
        print(f"report: {args.json_out}")
    return 0 if report["all_right"] else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--labs", default="all")
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--points", default=str(pathlib.Path(__file__).resolve().parent.parent / "tests/labs/points.json"))
    parser.add_argument("--junit-dir")
    parser.add_argument("--answers")
    parser.add_argument("--key")
    parser.add_argument("--reveal", action="store_true")
    parser.add_argument("--hidden")
    args = parser.parse_args()
    labs = parse_labs(args.labs)
    if args.answers:
        return grade_answers(args, labs)
    for flag, value in (("--key", args.key), ("--reveal", args.reveal)):
        if value:
            fail_usage(f"{flag}: only with --answers")
    default, special = load_points(args.points)
    build = pathlib.Path(args.build)
    if not args.junit_dir and not (build / "CTestTestfile.cmake").is_file():
        fail_usage(f"--build {build}: not a configured build folder (run scripts/setup.sh first)")
    hidden_default, hidden_points = add_hidden(build, args.hidden, labs) if args.hidden else (0, {})

    report = {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), "labs": []}
    all_passed = True
    with tempfile.TemporaryDirectory() as scratch:
        for lab in labs:
            if args.junit_dir:
                junit = pathlib.Path(args.junit_dir) / f"lab{lab}.xml"
            else:
                junit = pathlib.Path(scratch) / f"lab{lab}.xml"
                run_ctest(build, lab, junit)
            tests = []
            if junit.is_file():
                for name, result, seconds, output in outcomes(junit):
                    points = hidden_points.get(name, hidden_default) if name.startswith("hidden: ") else \
                        special.get(name, default)
                    entry = {"name": name, "result": result, "seconds": seconds, "points": points,
                             "earned": points if result == "passed" else 0}
                    tests.append(entry | ({"output": output} if output else {}))
            graded = [t for t in tests if t["result"] != "skipped"]
            entry = {"lab": lab, "tests": len(tests), "passed": sum(t["result"] == "passed" for t in tests),
                     "failed": sum(t["result"] == "failed" for t in tests),
                     "skipped": sum(t["result"] == "skipped" for t in tests),
                     "points": sum(t["earned"] for t in tests), "possible": sum(t["points"] for t in graded),
                     "results": tests}
            all_passed &= entry["failed"] == 0 and len(graded) > 0
            report["labs"].append(entry)

    if labs == LABS:  # a misspelt name in the points file would silently earn the default
        seen = {t["name"] for e in report["labs"] for t in e["results"]}
        unknown = sorted(set(special) - seen)
        if unknown and any(e["tests"] for e in report["labs"]):
            fail_usage(f"--points {args.points}: no lab has a test named {unknown[0]!r}")
    print("| lab | tests | passed | failed | skipped | points |")
    print("|---|---:|---:|---:|---:|---:|")
    for e in report["labs"]:
        note = "" if e["tests"] else " (no tests: is the lab built?)"
        print(f"| {e['lab']}{note} | {e['tests']} | {e['passed']} | {e['failed']} | {e['skipped']} | "
              f"{e['points']} / {e['possible']} |")
    earned, possible = sum(e["points"] for e in report["labs"]), sum(e["possible"] for e in report["labs"])
    print(f"\ntotal: {earned} / {possible} points" + ("" if all_passed else "; not every test passed"))
    for e in report["labs"]:
        for t in e["results"]:
            if t["result"] == "failed":
                print(f"failed: lab {e['lab']}: {t['name']}")
    report.update(points=earned, possible=possible, all_passed=all_passed)
    if args.json_out:
        pathlib.Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
        print(f"report: {args.json_out}")
    return 0 if all_passed else 1


if __name__ == "__main__":
    sys.exit(main())
