# SPDX-License-Identifier: MIT
"""Writes a student starter tree from the reference: marked solutions become stubs that fail clearly.

Usage: python3 tools/make_starter.py ROOT OUT [--labs all|04,06] [--list]

Every tracked file of ROOT (git ls-files) is copied to OUT. In the C++
sources, a region between

    // BEGIN LAB04 SOLUTION: BlockPool::get_new_blocks
    ...
    // END LAB04 SOLUTION

of a selected lab becomes SERVELAB_NOT_IMPLEMENTED("not implemented: lab
04, BlockPool::get_new_blocks") (core/not_implemented.h: it throws
servelab::Error on the host and traps in a CUDA kernel), so the tree builds,
and that lab's tests fail, naming what to write, until the student fills it in.
The Doxygen comment of the function (in its header) is the specification.
Regions of labs not selected keep their solutions: a course hands out one
lab at a time over the previous labs' answers. --list prints the regions
and writes nothing. Exits 1 naming file and line for a malformed marker.

The instructors' hidden tests (tests/labs/hidden/, graded with
`tools/grade.py --hidden DIR`) and the known-wrong implementations the
mutation runner applies (tests/labs/mutants/) are left out of the tree, so a
student cannot tune to them; so is the saved answer key
(tests/labs/answers_key.json): a student checks answers with the
instructor's key, `grade.sh --answers FILE --key KEY`.
"""
import argparse
import pathlib
import re
import shutil
import subprocess
import sys

BEGIN = re.compile(r"^(\s*)// BEGIN LAB(\d\d) SOLUTION: (.+)$")
END = re.compile(r"^\s*// END LAB(\d\d) SOLUTION$")
SOURCES = (".cpp", ".h", ".cu", ".cuh")
# Instructor-only folders that a starter tree does not contain.
LEFT_OUT = ("tests/labs/hidden/", "tests/labs/mutants/", "tests/labs/answers_key.json")


def regions(path, lines):
    """(lab, name, begin index, end index, indent) of each marked region; exits on a malformed one."""
    found, open_region = [], None
    for i, line in enumerate(lines):
        if (m := BEGIN.match(line)):
            if open_region:
                sys.exit(f"make_starter.py: {path}:{i + 1}: BEGIN inside the region opened at line {open_region[2] + 1}")
            open_region = (m.group(2), m.group(3).strip(), i, m.group(1))
        elif (m := END.match(line)):
            if not open_region or open_region[0] != m.group(1):
                sys.exit(f"make_starter.py: {path}:{i + 1}: END LAB{m.group(1)} without its BEGIN")
            found.append((open_region[0], open_region[1], open_region[2], i, open_region[3]))
            open_region = None
        elif "SOLUTION" in line and ("BEGIN LAB" in line or "END LAB" in line):
            sys.exit(f"make_starter.py: {path}:{i + 1}: malformed marker (expected '// BEGIN LABNN SOLUTION: what' "
                     f"or '// END LABNN SOLUTION')")
    if open_region:
        sys.exit(f"make_starter.py: {path}:{open_region[2] + 1}: BEGIN LAB{open_region[0]} is never closed")
    return found


def stub(lab, name, indent):
    what = name.replace("\\", "\\\\").replace('"', '\\"')
    return [f"{indent}// LAB{lab}: write this part: {name}. The function's Doxygen comment is the specification.",
            f'{indent}SERVELAB_NOT_IMPLEMENTED("not implemented: lab {lab}, {what}");']


def stub_lines(lines, found):
    """@p lines with each region of @p found (from regions()) replaced by its stub."""
    if not found:
        return lines
    result, last = [], 0
    for lab, name, b, e, indent in found:
        result += lines[last:b] + stub(lab, name, indent)
        last = e + 1
    result += lines[last:]
    # The stub's macro comes from core/not_implemented.h, included after the file's own first include.
    first = next(i for i, l in enumerate(result) if l.startswith("#include"))
    result.insert(first + 1, '#include "core/not_implemented.h"')
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--labs", default="all")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    root = pathlib.Path(args.root).resolve()
    files = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    files = [f for f in files if not f.startswith(LEFT_OUT)]
    marked = {}
    for f in files:
        if f.endswith(SOURCES) and (root / f).is_file():
            lines = (root / f).read_text().splitlines()
            if (found := regions(f, lines)):
                marked[f] = (lines, found)
    labs_marked = sorted({r[0] for _, found in marked.values() for r in found})
    selected = labs_marked if args.labs == "all" else [x.strip().zfill(2) for x in args.labs.split(",")]
    for lab in selected:
        if lab not in labs_marked:
            sys.exit(f"make_starter.py: --labs: lab {lab} has no marked region (marked: {', '.join(labs_marked)})")
    if args.list:
        for f, (_, found) in sorted(marked.items()):
            for lab, name, b, e, _ in found:
                print(f"lab {lab}  {f}:{b + 1}-{e + 1}  {name}")
        return 0
    if not args.out:
        sys.exit("make_starter.py: OUT is required unless --list")
    out = pathlib.Path(args.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    stubbed = 0
    for f in files:
        source, target = root / f, out / f
        if not source.is_file():
            continue  # a submodule or a file deleted but not committed
        target.parent.mkdir(parents=True, exist_ok=True)
        if f not in marked:
            shutil.copy2(source, target)
            continue
        lines, found = marked[f]
        chosen = [r for r in found if r[0] in selected]
        stubbed += len(chosen)
        target.write_text("\n".join(stub_lines(lines, chosen)) + "\n")
    print(f"make_starter.py: {stubbed} region(s) of lab(s) {', '.join(selected)} stubbed in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
