# SPDX-License-Identifier: MIT
"""Compares a learner's lab results with a reference run's, value by value, in terms that travel between machines.

Usage: python3 tools/compare_results.py STUDENT.json REFERENCE.json [--tolerance 0.25]

Both files are a lab's results/<lab>/<lab>.json (labs/common/report.h), from
runs with the same flags (a --quick run against a --quick run). Each table
is matched by name, each row by its first cell (and its place among rows
with the same first cell), each cell by its column's header, and the
column's header says how its values are compared:

- exact: text (token hashes, yes/no, labels), and numbers that count
  things the same on any machine (tokens, blocks, steps, bytes, FLOPs,
  intensity), equal to 1e-6 relative;
- ratio: a column the lab already divides (speedup, "vs ...", "a / b", a
  share of time such as busy [%]) is compared as it is, within
  --tolerance relative;
- scaled: a time or a rate ([ms], [s], tok/s, GB/s, ...) is divided by the
  largest value of its column in the same file first, so a machine twice as
  fast gives the same numbers; then within --tolerance, ignoring values
  under 1% of the column's largest;
- error: a numerical error (max err ...) only has to be of the same order
  (within 10x, or both under 1e-4);
- not compared: text that a machine decides (a bound measured here, a met
  SLO on the wall clock, a min/max pair of times).

Claims (results "claims") are matched by id and their 'held' compared. The
machine, settings and verdict are not compared. It prints each value that
differs and by how much, then a summary. Exit status: 0 when nothing
differs, 1 when something does, 2 on bad input (a file that is not a lab's
results, or results of two different labs).
"""
import argparse
import json
import math
import pathlib
import re
import sys

# Checked in this order; the first that matches a header (lower-cased) decides.
KINDS = [
    ("error", re.compile(r"\bmax err\b|\berr\b vs")),
    ("machine", re.compile(r"here\b|min/max|meets slo")),
    ("ratio", re.compile(r"speedup|\bvs\b| / |busy \[%\]|% of step|\berror\b|overlapped|met slo")),
    ("scaled", re.compile(r"\[(ms|s|us|µs|ns)\]|\bms\b|/s\b|/s\]|\btime\b|stall|overhead|achieved|\breal\b|wall")),
]
EXACT_RTOL = 1e-6
SCALED_FLOOR = 0.01  # scaled values below 1% of their column's largest are noise, not a result


class CompareError(Exception):
    """Bad input: the message names the file and what was expected."""


def kind_of(header):
    """'error' | 'machine' | 'ratio' | 'scaled' | 'exact': how a column's values are compared (module doc)."""
    h = header.lower()
    return next((kind for kind, pattern in KINDS if pattern.search(h)), "exact")


def load(path):
    try:
        results = json.loads(pathlib.Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CompareError(f"{path}: cannot read a results JSON ({getattr(e, 'strerror', None) or e})")
    if not (isinstance(results, dict) and isinstance(results.get("lab"), str) and
            isinstance(results.get("tables"), list) and
            all(isinstance(t, dict) and {"name", "columns", "rows"} <= t.keys() for t in results["tables"])):
        raise CompareError(f"{path}: expected a lab's results/<lab>/<lab>.json "
                           f"({{\"lab\": str, \"tables\": [{{\"name\", \"columns\", \"rows\"}}]}})")
    return results


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def keyed_rows(table):
    """{(first cell, occurrence): row}: rows found again in the other run by their label."""
    seen, rows = {}, {}
    for row in table["rows"]:
        label = json.dumps(row[0] if row else None)
        seen[label] = seen.get(label, 0) + 1
        rows[(label, seen[label])] = row
    return rows


def column_scale(table, index):
    """The largest |value| of a column: what a scaled value is divided by."""
    values = [abs(r[index]) for r in table["rows"] if index < len(r) and is_number(r[index])]
    return max(values, default=0.0)


def differs(kind, got, want, scale_got, scale_want, tolerance):
    """None when @p got (student) agrees with @p want (reference) under @p kind, else how they differ."""
    if kind == "machine":
        return None
    if not (is_number(got) and is_number(want)):
        return None if got == want else f"{got!r} vs {want!r}"
    if kind == "exact":
        ok = abs(got - want) <= EXACT_RTOL * max(abs(got), abs(want))
        return None if ok else f"{got:.6g} vs {want:.6g} (exact)"
    if kind == "error":
        small = max(abs(got), abs(want)) <= 1e-4
        same_order = min(abs(got), abs(want)) * 10 >= max(abs(got), abs(want))
        return None if small or same_order else f"{got:.3g} vs {want:.3g} (not within 10x)"
    if kind == "scaled":
        if scale_got == 0 or scale_want == 0:
            return None if scale_got == scale_want else f"{got:.6g} vs {want:.6g} (a column of zeros in one run)"
        got, want = got / scale_got, want / scale_want
        if max(abs(got), abs(want)) < SCALED_FLOOR:
            return None
    relative = abs(got - want) / max(abs(want), 1e-300)
    if relative <= tolerance:
        return None
    unit = " of the column's largest" if kind == "scaled" else ""
    return f"{got:.4g} vs {want:.4g}{unit} ({(got - want) / want:+.0%})" if want else f"{got:.4g} vs 0"


def compare(student, reference, tolerance):
    """(lines describing each difference, number of values compared)."""
    out, compared = [], 0
    tables = {t["name"]: t for t in student["tables"]}
    for ref in reference["tables"]:
        name = ref["name"]
        got = tables.pop(name, None)
        if got is None:
            out.append(f"table {name}: missing from the student's results")
            continue
        columns = [c for c in ref["columns"] if c in got["columns"]]
        for c in ref["columns"]:
            if c not in got["columns"]:
                out.append(f"table {name}: column {c!r} missing from the student's results")
        student_rows, reference_rows = keyed_rows(got), keyed_rows(ref)
        for key in reference_rows.keys() - student_rows.keys():
            out.append(f"table {name}: row {json.loads(key[0])!r} missing from the student's results")
        for key in student_rows.keys() - reference_rows.keys():
            out.append(f"table {name}: row {json.loads(key[0])!r} is not in the reference")
        for c in columns:
            i, j, kind = got["columns"].index(c), ref["columns"].index(c), kind_of(c)
            scale_got, scale_want = column_scale(got, i), column_scale(ref, j)
            for key, want_row in reference_rows.items():
                got_row = student_rows.get(key)
                if got_row is None or i >= len(got_row) or j >= len(want_row):
                    continue
                compared += kind != "machine"
                why = differs(kind, got_row[i], want_row[j], scale_got, scale_want, tolerance)
                if why:
                    out.append(f"table {name}, row {json.loads(key[0])!r}, {c}: {why}")
    for name in tables:
        out.append(f"table {name}: not in the reference")
    claims = {c.get("id"): c for c in student.get("claims", [])}
    for ref in reference.get("claims", []):
        got = claims.get(ref.get("id"))
        compared += 1
        if got is None:
            out.append(f"claim {ref.get('id')}: missing from the student's results")
        elif got.get("held") != ref.get("held"):
            out.append(f"claim {ref.get('id')}: held {got.get('held')} vs {ref.get('held')} "
                       f"(student: {got.get('evidence', '')}; reference: {ref.get('evidence', '')})")
    return out, compared


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("student")
    parser.add_argument("reference")
    parser.add_argument("--tolerance", type=float, default=0.25,
                        help="relative difference allowed for ratios and scaled times (default 0.25)")
    args = parser.parse_args()
    try:
        if not (math.isfinite(args.tolerance) and args.tolerance >= 0):
            raise CompareError(f"--tolerance: expected a number >= 0, got {args.tolerance}")
        student, reference = load(args.student), load(args.reference)
        if student["lab"] != reference["lab"]:
            raise CompareError(f"{args.student} is lab {student['lab']}'s results and {args.reference} is lab "
                               f"{reference['lab']}'s: compare a lab with the same lab")
    except CompareError as e:
        print(f"compare_results.py: {e}", file=sys.stderr)
        return 2
    differences, compared = compare(student, reference, args.tolerance)
    for line in differences:
        print(line)
    print(f"{reference['lab']}: {compared} values compared, {len(differences)} differ"
          f" (ratios and scaled times within {args.tolerance:.0%})")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
