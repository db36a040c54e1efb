#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the course's claim table from the labs' results JSON.

Usage: python3 tools/claims.py [--results DIR] [--out FILE] [--note TEXT]

Every lab saves the claims its verdict checked under "claims" in
<results>/<lab>/<lab>.json (Report::claim, labs/common/report.h). This tool
reads every such file and writes one Markdown table, claim -> source -> lab ->
held or not -> evidence (and the cause of a miss), with one line per lab
saying which machine and commit made its numbers. --note adds a paragraph
under the heading, e.g. how the runs were made. Defaults: --results results,
--out docs/claims.md.
"""
import argparse
import json
import pathlib
import sys

FIELDS = ("id", "source", "statement", "held", "evidence", "cause")


def cell(text):
    """One Markdown table cell: pipes escaped, line breaks folded."""
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def read_labs(results):
    """[(lab, results JSON)] for every <results>/<lab>/<lab>.json, in lab order."""
    labs = []
    for path in sorted(results.glob("*/*.json")):
        if path.stem != path.parent.name:
            continue  # another JSON file in a lab's folder
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise SystemExit(f"claims.py: {path}: not JSON ({e})")
        for i, claim in enumerate(data.get("claims", [])):
            missing = [f for f in FIELDS if f not in claim]
            if missing:
                raise SystemExit(f"claims.py: {path}: claim {i} has no {', '.join(missing)}")
            if not claim["held"] and not claim["cause"]:
                raise SystemExit(f"claims.py: {path}: claim {claim['id']} did not hold and gives no cause")
        labs.append((path.parent.name, data))
    if not labs:
        raise SystemExit(f"claims.py: --results {results}: no <lab>/<lab>.json under it (run a lab first)")
    return labs


def markdown(labs, note):
    claims = [(lab, c) for lab, data in labs for c in data.get("claims", [])]
    held = sum(1 for _, c in claims if c["held"])
    lines = ["# Claims, checked", "",
             "Each row is a claim a chapter makes, checked by its lab on the numbers of one run "
             "(`Report::claim`, `labs/common/report.h`). Written by `tools/claims.py` from "
             "`results/<lab>/<lab>.json`; do not edit by hand.", ""]
    if note:
        lines += [note, ""]
    lines += [f"{len(claims)} claims from {len(labs)} labs: {held} held, {len(claims) - held} did not hold.", "",
              "| claim | source | lab | status | evidence / cause |", "|---|---|---|---|---|"]
    for lab, c in claims:
        status = "held" if c["held"] else "did not hold"
        evidence = c["evidence"] + ("" if c["held"] else f"; because {c['cause']}")
        lines.append(f"| {cell(c['statement'])} (`{cell(c['id'])}`) | {cell(c['source'])} | {cell(lab)} | "
                     f"{status} | {cell(evidence)} |")
    lines += ["", "Machines:", ""]
    for lab, data in labs:
        m = data.get("machine", {})
        lines.append(f"- {lab}: {m.get('date_utc', '?')[:10]} on {m.get('cpu', '?')} "
                     f"({m.get('cpu_threads', '?')} threads), commit {m.get('git_commit', '?')}")
    return "\n".join(lines) + "\n"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results", type=pathlib.Path, help="results root the labs wrote")
    parser.add_argument("--out", default="docs/claims.md", type=pathlib.Path, help="Markdown file to write")
    parser.add_argument("--note", default="", help="a paragraph under the heading: how the runs were made")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        raise SystemExit(f"claims.py: --results {args.results}: not a folder")
    labs = read_labs(args.results)
    args.out.write_text(markdown(labs, args.note))
    count = sum(len(data.get("claims", [])) for _, data in labs)
    print(f"claims.py: {count} claims from {len(labs)} labs written to {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
