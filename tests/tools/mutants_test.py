# SPDX-License-Identifier: MIT
"""tools/mutants.py refuses bad usage with one line and exit 2, and a mutant that does not apply leaves
the tree as it was (the dry run before patch(1), which would otherwise apply the hunks that fit).

Usage: python3 tests/tools/mutants_test.py REPO_ROOT
"""
import pathlib
import subprocess
import sys
import tempfile

root = pathlib.Path(sys.argv[1]).resolve()
sys.path.insert(0, str(root / "tools"))
import mutants  # noqa: E402

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def usage(args, needle):
    r = subprocess.run([sys.executable, str(root / "tools" / "mutants.py"), *args], capture_output=True, text=True,
                       timeout=60)
    expect(r.returncode == 2, f"{args}: exit 2, got {r.returncode}")
    expect(needle in r.stderr, f"{args}: stderr names the problem ({needle!r}), got {r.stderr.strip()!r}")


usage(["--per-lab", "-1"], "--per-lab must be >= 0")
usage(["--sample", "-1"], "--sample must be >= 0")
usage(["--labs", "99"], "lab 99 has no mutants")

# A two-hunk patch whose second hunk does not match: nothing may change.
with tempfile.TemporaryDirectory() as tmp:
    work = pathlib.Path(tmp)
    text = "".join(f"line {i}\n" for i in range(1, 21))
    (work / "f.txt").write_text(text)
    patch_file = work / "m.patch"
    patch_file.write_text("Region: r\nMutant: m\n--- a/f.txt\n+++ b/f.txt\n"
                          "@@ -1,3 +1,3 @@\n line 1\n-line 2\n+line two\n line 3\n"
                          "@@ -15,3 +15,3 @@\n line 15\n-not there\n+line sixteen\n line 17\n")
    try:
        mutants.patch(work, patch_file)
        expect(False, "a patch that does not apply: SystemExit(2)")
    except SystemExit as e:
        expect(e.code == 2, f"a patch that does not apply: exit 2, got {e.code}")
    expect((work / "f.txt").read_text() == text, "a patch that does not apply leaves the file unchanged")
    # The same patch with a matching second hunk applies and reverts to the original.
    patch_file.write_text(patch_file.read_text().replace("-not there", "-line 16"))
    mutants.patch(work, patch_file)
    expect("line two" in (work / "f.txt").read_text(), "a patch that applies changes the file")
    mutants.patch(work, patch_file, reverse=True)
    expect((work / "f.txt").read_text() == text, "reverting a mutant restores the file")

# The reference's grade: a test failing once is shown with its output and graded again; twice ends the run.
PASSED = {"name": "t", "result": "passed", "points": 3}
FAILED = {"name": "t", "result": "failed", "points": 3, "output": "REQUIRE( x ) failed"}


def reference_with(rounds):
    calls = []
    mutants.grade_results = lambda work, lab, hidden: calls.append(1) or rounds[len(calls) - 1]
    try:
        return mutants.grade_reference(None, "07", None), len(calls)
    except SystemExit as e:
        return e.code, len(calls)


expect(reference_with([[PASSED]]) == ({"t": ("passed", 3)}, 1), "a passing reference is graded once")
expect(reference_with([[FAILED], [PASSED]]) == ({"t": ("passed", 3)}, 2),
       "a reference test failing once, then passing, is graded twice and the run goes on")
expect(reference_with([[FAILED], [FAILED]]) == (2, 2), "a reference test failing twice ends the run with exit 2")
expect(reference_with([[]]) == (2, 1), "a lab with no tests ends the run with exit 2")

print("mutants_test:", "ok" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
