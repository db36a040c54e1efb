#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Pastes a lab's tables from its results JSON into its README chapter and the chapter's Korean edition.

Usage: python3 tools/paste_results.py results/02_kv_cache/02_kv_cache.json labs/02_kv_cache/README.md

The chapter marks each place with a pair of comments:
    <!-- results:settings -->  ...  <!-- /results -->
    <!-- results:kv_cache_speedup -->  ...  <!-- /results -->
Everything between a pair is replaced by the Markdown of that table (or the
settings block, or the machine line), so the numbers in a chapter always come
from a real run and are never typed by hand. A table keeps its title as an
italic caption line above it, since the title is sometimes the only place that
says what the table holds (a dry run's size, the simulated GPU).

One paste serves both editions: when README.ko.md sits beside README.md, the
same blocks, byte for byte, go into it too (tools/check_editions.py fails when
the two differ), so the numbers are pasted once and shown in both languages.
"""
import json
import pathlib
import re
import sys


def fmt(cell, digits):
    if isinstance(cell, float):
        return f"{cell:.{digits}f}"
    return str(cell)


def table_markdown(table):
    # The digits the lab itself printed (the JSON keeps full precision).
    rows = table["rows"]
    digits = table.get("precision") or [3] * len(table["columns"])
    lines = [f"*{table['title']}*", ""] if table.get("title") else []
    lines.append("| " + " | ".join(table["columns"]) + " |")
    lines.append("|" + "|".join("---:" if rows and not isinstance(rows[0][i], str) else "---"
                                for i in range(len(table["columns"]))) + "|")
    for r in rows:
        lines.append("| " + " | ".join(fmt(c, digits[i] if i < len(digits) else 2) for i, c in enumerate(r)) + " |")
    text = "\n".join(lines)
    if table.get("note"):
        text += "\n\n" + table["note"]
    return text


def main(results_file, chapter_file):
    results = json.loads(pathlib.Path(results_file).read_text())
    chapter = pathlib.Path(chapter_file)
    blocks = {t["name"]: table_markdown(t) for t in results["tables"]}
    m = results["machine"]
    blocks["machine"] = (f"Measured on {m['date_utc'][:10]} on {m['cpu']} ({m['cpu_threads']} threads), "
                         f"commit {m['git_commit']}.")
    blocks["settings"] = "```\n" + "\n".join(f"{k:<11} {v}" for k, v in results["settings"].items()) + "\n```"
    blocks["verdict"] = "**Verdict:** " + results["verdict"]
    claims = results.get("claims", [])
    if claims:
        blocks["verdict"] += "\n\n" + "\n".join(
            f"- **{'held' if c['held'] else 'did not hold'}:** {c['statement']}: {c['evidence']}"
            + ("" if c["held"] else f"; because {c['cause']}") for c in claims)

    # The Korean edition (README.ko.md beside README.md) gets the very same blocks; both are checked
    # before either is written, so a failed paste leaves the two editions as they were, still in step.
    editions = [chapter] + [e for e in [chapter.with_name(chapter.stem + ".ko.md")] if e.is_file()]
    pasted = [(edition, *paste(blocks, results_file, edition)) for edition in editions]
    for edition, text, count in pasted:
        edition.write_text(text)
        print(f"pasted {count} blocks into {edition}")


def paste(blocks, results_file, chapter):
    """One chapter edition's text with every marked block replaced, and the count; exits on a block the run lacks."""

    def replace(match):
        name = match.group(1)
        if name not in blocks:
            raise SystemExit(f"paste_results.py: {chapter} asks for '{name}', not in {results_file}")
        return f"<!-- results:{name} -->\n{blocks[name]}\n<!-- /results -->"

    new, count = re.subn(r"<!-- results:([\w.-]+) -->.*?<!-- /results -->", replace, chapter.read_text(), flags=re.S)
    if count == 0:
        raise SystemExit(f"paste_results.py: {chapter} has no <!-- results:NAME --> markers")
    return new, count


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
