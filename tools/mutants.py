# SPDX-License-Identifier: MIT
"""Mutation runner: applies known-wrong implementations of the labs' regions and checks the grade catches each.

Usage: python3 tools/mutants.py [--labs 01,04] [--sample N] [--per-lab N] [--work DIR | --in-place]
                                [--table docs/mutants.md] [--stubs] [--hidden DIR]

Each file tests/labs/mutants/labNN/NAME.patch is a plausible wrong
implementation of one marked region (tools/make_starter.py): two header
lines, `Region: <the region's name>` and `Mutant: <what it gets wrong>`,
then a unified diff against the reference. The runner keeps one copy of the
tree in --work DIR (default: TREE-mutants beside the tree, at the tree's
depth, so ccache's base_dir serves the tree's own compiled files), with its
own build folder (the release preset), so every mutant is an incremental
build: sync the copy
with the tree, then for each mutant apply it, build only labNN_tests and the
lab's executable, grade the lab with tools/grade.py, and revert it. A mutant
is caught when a graded test worth 3 points or more fails; the report names
every graded test that failed and the points lost.

--sample N takes the first N mutants (by name) of each region: --sample 1 is
one per region. --per-lab N then keeps the first N of each lab (regions by
name). --in-place works in the tree itself and its build/ (scripts/setup.sh's),
with no copy to build: CI's form, `--in-place --per-lab 1`, costs one
incremental build per mutant; every mutant and stub is reverted (also on an
error or an interrupt) and every lab's targets it built are built from the
reference again at the end. --stubs also grades each lab with all of its regions stubbed (the
starter tree's state) and with none, and reports the points each earns; with
the lab stubbed it grades every earlier lab too, which must keep all of its
reference points (a starter tree of lab N must not break labs 01 to N-1).
--table writes the Markdown table (mutant, what it gets
wrong, the tests that caught it, points lost; and the stub rows) to a file.
Exit status 0 when every mutant is caught and no stubbed lab earns more than
10% of its points; 1 otherwise; 2 on bad usage or when the reference itself
does not build or pass. A reference test that fails is printed with its
output and the lab graded again: passing then, it is named FLAKY and the run
goes on; failing twice, the run stops.
"""
import argparse
import collections
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import make_starter

ROOT = pathlib.Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "tests" / "labs" / "mutants"
CATCH_POINTS = 3  # a mutant must fail a test worth at least this much
STUB_SHARE = 0.10  # a lab with every region stubbed may keep at most this share of its points


def fail_usage(message):
    print(f"mutants.py: {message}", file=sys.stderr)
    sys.exit(2)


def read_mutant(path):
    """(region, description) from a patch's header lines."""
    head = dict(line.split(": ", 1) for line in path.read_text().splitlines()[:2] if ": " in line)
    if "Region" not in head or "Mutant" not in head:
        fail_usage(f"{path}: expected 'Region: ...' and 'Mutant: ...' as its first two lines")
    return head["Region"].strip(), head["Mutant"].strip()


def lab_exe_target(lab):
    folder = next((ROOT / "labs").glob(f"{lab}_*"), None)
    if folder is None:
        fail_usage(f"--labs: no folder labs/{lab}_*")
    return f"lab_{folder.name}"


def sync(work):
    """Copies the tree's tracked files into work/ where they differ, so the copy's build stays incremental."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    for f in files:
        source, target = ROOT / f, work / f
        if not source.is_file():
            continue
        if target.is_file() and target.read_bytes() == source.read_bytes():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        # A fresh modification time (not the tree's, as copy2 would keep): the copy's build must see the
        # change even when it restores a file that a mutant or a stub left newer than the tree's.
        shutil.copyfile(source, target)


BUILT = set()  # labs whose targets some build linked, perhaps with a mutant or a stub: --in-place rebuilds them


def build(work, lab, hidden):
    BUILT.add(lab)
    build_dir = work / "build"
    if not (build_dir / "CMakeCache.txt").is_file():
        # The tree's own release preset, so ccache serves every file the tree's build already compiled.
        launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"] \
            if shutil.which("ccache") else []
        subprocess.run(["cmake", "-S", str(work), "--preset", "release", *launcher], cwd=work,
                       stdout=subprocess.DEVNULL, check=True)
    targets = [f"lab{lab}_tests", lab_exe_target(lab)]
    r = subprocess.run(["cmake", "--build", str(build_dir), "-j2", "--target", *targets], capture_output=True,
                       text=True)
    return r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def grade(work, lab, hidden):
    """{test name: (result, points)} of lab @p lab in the copy's build."""
    return {t["name"]: (t["result"], t["points"]) for t in grade_results(work, lab, hidden)}


def grade_results(work, lab, hidden):
    """tools/grade.py's JSON entries of lab @p lab's tests (name, result, points; output when failed)."""
    report = work / "grade.json"
    command = [sys.executable, str(ROOT / "tools" / "grade.py"), "--build", str(work / "build"), "--labs", lab,
               "--points", str(ROOT / "tests" / "labs" / "points.json"), "--json", str(report)]
    if hidden:
        command += ["--hidden", str(hidden)]
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    if not report.is_file():
        return {}
    entry = json.loads(report.read_text())["labs"][0]
    report.unlink()
    return entry["results"]


def grade_reference(work, lab, hidden):
    """{test name: (result, points)} of the unmutated lab @p lab. A test that fails is shown with its output
    and the lab graded once more: one that then passes is named as flaky, and the run goes on (every test
    already ran once, strictly, in the suite itself); one that fails twice ends the run (exit 2)."""
    results = grade_results(work, lab, hidden)
    failed = [t for t in results if t["result"] == "failed"]
    for t in failed:
        print(f"mutants.py: lab {lab}: the reference fails {t['name']!r}; its output ends:\n{t.get('output', '')}",
              flush=True)
    reference = grade(work, lab, hidden) if failed else {t["name"]: (t["result"], t["points"]) for t in results}
    failing = [n for n, (res, _) in reference.items() if res == "failed"]
    if not reference or failing:
        fail_usage(f"lab {lab}: the reference does not pass its own grade: {'; '.join(failing) or 'no tests'}")
    for t in failed:
        print(f"mutants.py: lab {lab}: FLAKY: {t['name']!r} failed once and passed when graded again", flush=True)
    return reference


def patch(work, path, reverse=False):
    # patch(1), not git apply: the copy may sit inside another git work tree, whose paths git would use.
    # A dry run first: a patch that fails one hunk would still apply the others and leave the tree half changed.
    command = ["patch", "-p1", "--silent", "--no-backup-if-mismatch", "-i", str(path)] + (["-R"] if reverse else [])
    for attempt in (["--dry-run"], []):
        r = subprocess.run(command + attempt, cwd=work, capture_output=True, text=True)
        if r.returncode != 0:
            fail_usage(f"{path}: does not apply to {work} ({(r.stdout + r.stderr).strip()})")


def stub_lab(work, lab):
    """Stubs every region of @p lab in the copy; returns the original texts to restore."""
    saved = {}
    for f in subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True,
                            check=True).stdout.split():
        if not f.endswith(make_starter.SOURCES) or not (work / f).is_file():
            continue
        text = (work / f).read_text()
        lines = text.splitlines()
        found = [r for r in make_starter.regions(f, lines) if r[0] == lab]
        if not found:
            continue
        saved[f] = text
        (work / f).write_text("\n".join(make_starter.stub_lines(lines, found)) + "\n")
    return saved


def score(results):
    graded = {n: r for n, r in results.items() if r[0] != "skipped"}
    return (sum(p for res, p in graded.values() if res == "passed"), sum(p for _, p in graded.values()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labs", default="all")
    parser.add_argument("--sample", type=int, default=0)
    parser.add_argument("--per-lab", type=int, default=0)
    parser.add_argument("--work", default=str(ROOT.parent / f"{ROOT.name}-mutants"))
    parser.add_argument("--in-place", action="store_true")
    parser.add_argument("--table")
    parser.add_argument("--stubs", action="store_true")
    parser.add_argument("--hidden")
    args = parser.parse_args()
    if args.sample < 0:
        fail_usage(f"--sample must be >= 0 (0 = every mutant), got {args.sample}")
    if args.per_lab < 0:
        fail_usage(f"--per-lab must be >= 0 (0 = every mutant chosen), got {args.per_lab}")
    labs = sorted(p.name[3:] for p in MUTANTS.glob("lab[0-9][0-9]")) if MUTANTS.is_dir() else []
    all_labs = list(labs)
    if not labs:
        print("mutants.py: no tests/labs/mutants/labNN folder (a starter tree?): nothing to run")
        return 0
    if args.labs != "all":
        wanted = [x.strip().zfill(2) for x in args.labs.split(",") if x.strip()]
        for lab in wanted:
            if lab not in labs:
                fail_usage(f"--labs: lab {lab} has no mutants (labs with mutants: {', '.join(labs)})")
        labs = wanted
    if args.in_place:
        work = ROOT
        if not (work / "build" / "CMakeCache.txt").is_file():
            fail_usage(f"--in-place: no {work / 'build'} to build in; run scripts/setup.sh first")
    else:
        work = pathlib.Path(args.work).resolve()
        work.mkdir(parents=True, exist_ok=True)
        sync(work)

    rows, stub_rows, problems = [], [], []
    references = {}  # lab -> (points, possible) of the reference
    started = time.monotonic()
    for lab in labs:
        by_region = collections.defaultdict(list)
        for path in sorted((MUTANTS / f"lab{lab}").glob("*.patch")):
            by_region[read_mutant(path)[0]].append(path)
        chosen = [p for region in sorted(by_region) for p in (by_region[region][:args.sample] if args.sample
                                                              else by_region[region])]
        if args.per_lab:
            chosen = chosen[:args.per_lab]
        ok, log = build(work, lab, args.hidden)
        if not ok:
            fail_usage(f"lab {lab}: the reference does not build in {work}:\n{log}")
        reference = grade_reference(work, lab, args.hidden)
        references[lab] = score(reference)
        if args.stubs:
            saved = stub_lab(work, lab)
            try:
                ok, log = build(work, lab, args.hidden)
                earned, possible = score(grade(work, lab, args.hidden)) if ok else (0, score(reference)[1])
                earlier = []  # (lab, points earned with this lab stubbed, reference points)
                for before in (m for m in all_labs if m < lab):
                    if before not in references:  # --labs skipped it: its reference grade, then back to the stub
                        restored = {f: (work / f).read_text() for f in saved}
                        for f, text in saved.items():
                            (work / f).write_text(text)
                        built, _ = build(work, before, args.hidden)
                        references[before] = score(grade(work, before, args.hidden)) if built else (0, 0)
                        for f, text in restored.items():
                            (work / f).write_text(text)
                    built, _ = build(work, before, args.hidden)
                    got = score(grade(work, before, args.hidden))[0] if built else 0
                    earlier.append((before, got, references[before][0]))
                    if got < references[before][0]:
                        problems.append(f"lab {lab} stubbed: lab {before} earns {got} of its "
                                        f"{references[before][0]} points")
            finally:  # the tree is whole again however the grading ended (--in-place works in it)
                for f, text in saved.items():
                    (work / f).write_text(text)
            stub_rows.append((lab, earned, possible, score(reference)))
            if earned > STUB_SHARE * possible:
                problems.append(f"lab {lab} with every region stubbed earns {earned} of {possible} points")
            print(f"lab {lab}: stubbed {earned}/{possible}, reference {score(reference)[0]}/{score(reference)[1]}"
                  + "".join(f"; lab {m} {g}/{r}" for m, g, r in earlier), flush=True)
        for path in chosen:
            region, description = read_mutant(path)
            patch(work, path)
            try:
                ok, log = build(work, lab, args.hidden)
                results = grade(work, lab, args.hidden) if ok else {}
            finally:
                patch(work, path, reverse=True)
            if not ok:
                problems.append(f"lab {lab} {path.stem}: the mutant does not build")
                continue
            caught = sorted(((n, p) for n, (res, p) in results.items() if res == "failed" and p > 0),
                            key=lambda x: (-x[1], x[0]))
            lost = sum(p for _, p in caught)
            rows.append((lab, path.stem, region, description, caught, lost))
            verdict = "caught" if any(p >= CATCH_POINTS for _, p in caught) else "NOT CAUGHT"
            if verdict != "caught":
                problems.append(f"lab {lab} {path.stem}: no graded test worth {CATCH_POINTS} points fails")
            print(f"lab {lab} {path.stem}: {verdict}, {len(caught)} graded test(s) fail, {lost} points lost",
                  flush=True)
            if args.table:  # after every mutant, so an interrupted run keeps what it found
                write_table(pathlib.Path(args.table), rows, stub_rows, " ".join(["python3 tools/mutants.py",
                                                                                  *sys.argv[1:]]),
                            (time.monotonic() - started) / 60)
    if args.in_place:  # each lab's binaries were last linked with a mutant or a stub: build them from the reference
        for lab in sorted(BUILT):
            ok, log = build(work, lab, args.hidden)
            if not ok:
                problems.append(f"lab {lab}: the reference no longer builds after the mutants were reverted:\n{log}")
    minutes = (time.monotonic() - started) / 60
    if args.table:
        command = " ".join(["python3 tools/mutants.py", *sys.argv[1:]])
        write_table(pathlib.Path(args.table), rows, stub_rows, command, minutes, done=True)
    for p in problems:
        print("mutants.py:", p)
    print(f"mutants.py: {len(rows)} mutant(s) of lab(s) {', '.join(labs)} in {minutes:.1f} min; "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


def write_table(path, rows, stub_rows, command, minutes, done=False):
    out = ["<!-- Written by tools/mutants.py; do not edit. -->",
           "# Mutation table: what the graded tests catch", "",
           "Each row is a plausible wrong implementation of one region a student writes",
           "(tests/labs/mutants/labNN/NAME.patch), applied to the reference alone; the lab is",
           f"then graded. A mutant is caught when a graded test worth {CATCH_POINTS} points or more fails.",
           f"Made by `{command}` ({minutes:.0f} min on this machine" + ("" if done else ", not finished") + ").",
           ""]
    if stub_rows:
        out += ["| lab | points with every region stubbed | points of the reference |", "|---|---:|---:|"]
        out += [f"| {lab} | {e} / {p} | {r[0]} / {r[1]} |" for lab, e, p, r in stub_rows]
        out += [""]
    out += ["| lab | mutant | region | what it gets wrong | graded tests that fail (points) | points lost |",
            "|---|---|---|---|---|---:|"]
    for lab, name, region, description, caught, lost in rows:
        tests = "; ".join(f"{n} ({p})" for n, p in caught) or "**none**"
        out.append(f"| {lab} | {name} | {region} | {description} | {tests} | {lost} |")
    path.write_text("\n".join(out) + "\n")
    print(f"mutants.py: wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
