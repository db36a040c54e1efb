#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks that the English and Korean editions of the course pages are in step (ctest docs.editions).

Usage: python3 tools/check_editions.py ROOT
       python3 tools/check_editions.py --self-test ROOT

A page X.md has its Korean edition in X.ko.md beside it. Every lab chapter
(labs/NN_*/README.md), the main page, the student's guide, the glossary and
the concept pages must have one; the engineering notes may stay English. For
each pair the two editions must have:
  - the same sections: as many headings, at the same levels, in the same order;
    a heading's Doxygen label {#name} is {#name_ko} in the Korean edition, so
    the site's pages never share a label and each finds its other edition;
  - the same pasted blocks, byte for byte: every <!-- results:NAME --> block
    that tools/paste_results.py fills, and every <!-- shared:NAME --> block
    written once for both (the glossary's table), in the same order;
  - the same figures: the same image paths in the same order;
  - the same question ids (the `NN.name` that opens each question).
It also fails on Korean emphasis that Doxygen would show as literal asterisks:
**bold** or *em* with a particle glued on (**Prefill**은), which Markdown on
GitHub renders but Doxygen does not; such a span is written <b>Prefill</b>은.
A Korean page with no English page beside it fails too. Prints one line per
difference, naming the page and the first place they part, and exits 1 if there
is any. --self-test breaks a copy of lab 01's pair in each
of those ways, and removes its Korean edition, and fails unless each is caught.
"""
import pathlib
import re
import sys
import tempfile

# The pages a Korean reader needs; the engineering notes (docs/serving.md, docs/claims.md, ...) may stay English.
NEEDS_KOREAN = ["labs/[0-9][0-9]_*/README.md", "docs/mainpage.md", "docs/student.md", "docs/glossary.md",
                "docs/concepts/*.md"]
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+\S")
LABEL = re.compile(r"\{#([\w-]+)\}\s*$")
BLOCK = re.compile(r"<!-- (results|shared):([\w.-]+) -->(.*?)<!-- /\1 -->", re.S)
FIGURE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)|<img\s[^>]*src=\"([^\"]+)\"")
QUESTION = re.compile(r"^\s*\d+\.\s+`(\d\d\.[\w.-]+)`", re.M)
# Emphasis whose closing star touches a Hangul (any non-ASCII) character: Doxygen does not close it.
GLUED = re.compile(r"(?<![\w*\\])(\*\*?)[^\s*][^*\n]*?\1(?=[^\x00-\x7f])")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def headings(text):
    """The (level, line, label) of each Markdown heading outside fenced code, where '#' starts shell comments."""
    found, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and HEADING.match(line):
            label = LABEL.search(line)
            found.append((len(HEADING.match(line).group(1)), line.strip(), label.group(1) if label else None))
    return found


def first_difference(english, korean):
    """The index where two lists first differ (the shorter list's length when one extends the other)."""
    return next((i for i, (e, k) in enumerate(zip(english, korean)) if e != k), min(len(english), len(korean)))


def compare(english_path, korean_path, root):
    """Every way the Korean edition is out of step with the English one, as one line each."""
    english, korean = english_path.read_text(), korean_path.read_text()
    page = english_path.relative_to(root)
    problems = []

    en_h, ko_h = headings(english), headings(korean)
    if [h[0] for h in en_h] != [h[0] for h in ko_h]:
        i = first_difference([h[0] for h in en_h], [h[0] for h in ko_h])
        at = lambda h: f"'{h[i][1]}'" if i < len(h) else "the end"
        problems.append(f"{page}: sections differ: {len(en_h)} headings in English, {len(ko_h)} in Korean; "
                        f"heading {i + 1} is {at(en_h)} in English, {at(ko_h)} in Korean")
    else:
        for (_, en_line, en_label), (_, ko_line, ko_label) in zip(en_h, ko_h):
            want = en_label and en_label + "_ko"
            if ko_label != want:
                problems.append(f"{page}: labels differ: '{ko_line}' must end in "
                                f"{'{#' + want + '}' if want else 'no label'}, as '{en_line}' is labelled")

    en_b = [(kind, name, body) for kind, name, body in BLOCK.findall(english)]
    ko_b = [(kind, name, body) for kind, name, body in BLOCK.findall(korean)]
    if en_b != ko_b:
        i = first_difference(en_b, ko_b)
        if i < len(en_b) and i < len(ko_b) and en_b[i][:2] == ko_b[i][:2]:
            problems.append(f"{page}: tables differ: block '{en_b[i][1]}' is not the same in both editions "
                            f"(paste once with tools/paste_results.py, or copy the English block)")
        else:
            names = lambda b: ", ".join(n for _, n, _ in b) or "none"
            problems.append(f"{page}: tables differ: the English blocks are {names(en_b)}; the Korean {names(ko_b)}")

    en_f = [a or b for a, b in FIGURE.findall(english)]
    ko_f = [a or b for a, b in FIGURE.findall(korean)]
    if en_f != ko_f:
        problems.append(f"{page}: figures differ: English shows {en_f or 'none'}, Korean {ko_f or 'none'}")

    prose = CODE.sub("", BLOCK.sub("", korean))
    glued = [m.group(0) + prose[m.end()] for m in GLUED.finditer(prose)]
    if glued:
        problems.append(f"{korean_path.relative_to(root)}: emphasis Doxygen shows as literal stars: {glued[:3]} "
                        f"(write <b>...</b> or <em>...</em> before a particle)")

    en_q, ko_q = QUESTION.findall(english), QUESTION.findall(korean)
    if en_q != ko_q:
        missing = [q for q in en_q if q not in ko_q]
        extra = [q for q in ko_q if q not in en_q]
        detail = f"missing in Korean {missing}, only in Korean {extra}" if missing or extra else "in another order"
        problems.append(f"{page}: question ids differ: {detail}")
    return problems


def check(root):
    """Every problem of the whole tree: a page without its Korean edition (or the reverse), or a pair out of step."""
    problems = []
    for pattern in NEEDS_KOREAN:
        for english in sorted(root.glob(pattern)):
            if english.name.endswith(".ko.md"):
                continue
            korean = english.with_name(english.stem + ".ko.md")
            if not korean.is_file():
                problems.append(f"{english.relative_to(root)}: no Korean edition ({korean.name} beside it)")
            else:
                problems += compare(english, korean, root)
        # A Korean page whose English one was renamed or removed would drift unchecked.
        for korean in sorted(root.glob(pattern.removesuffix(".md") + ".ko.md")):
            if not korean.with_name(korean.name.removesuffix(".ko.md") + ".md").is_file():
                problems.append(f"{korean.relative_to(root)}: no English page beside it to keep in step with")
    return problems


def self_test(root):
    """Breaks a copy of lab 01's pair in each checked way; returns the defects the checker missed."""
    lab = next(iter(sorted(root.glob("labs/01_*"))), None)
    if lab is None or not (lab / "README.ko.md").is_file():
        return ["lab 01 has no README.ko.md to break"]
    english, korean = (lab / "README.md").read_text(), (lab / "README.ko.md").read_text()
    first_heading = next(line for line in korean.splitlines() if line.startswith("## "))
    first_block = BLOCK.search(korean).group(3)
    first_figure = next(a or b for a, b in FIGURE.findall(korean))
    first_question = QUESTION.search(korean).group(1)
    breaks = {
        "sections differ": korean.replace(first_heading, first_heading[3:], 1),
        "labels differ": korean.replace(first_heading, first_heading + " {#lab01_run}", 1),
        "tables differ": korean.replace(first_block, first_block.replace("\n", "\n\n", 1), 1),
        "figures differ": korean.replace(first_figure, first_figure.replace(".png", "_old.png"), 1),
        "question ids differ": korean.replace(f"`{first_question}`", f"`{first_question}x`", 1),
        "emphasis Doxygen shows": korean.replace(first_heading, first_heading + "\n\n**Prefill**은", 1),
        "no Korean edition": None,
    }
    missed = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / "labs" / lab.name
        copy.mkdir(parents=True)
        (copy / "README.md").write_text(english)
        (copy / "README.ko.md").write_text(korean)
        if check(pathlib.Path(tmp)):
            return [f"the unbroken pair already fails: {check(pathlib.Path(tmp))}"]
        for kind, broken in breaks.items():
            if broken is None:
                (copy / "README.ko.md").unlink()
            else:
                (copy / "README.ko.md").write_text(broken)
            found = check(pathlib.Path(tmp))
            if not any(kind in p for p in found):
                missed.append(f"'{kind}' not caught (checker said {found or 'nothing'})")
            print(f"check_editions: self-test, {kind}: {'caught' if found else 'MISSED'}")
            (copy / "README.ko.md").write_text(korean)
    return missed


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        missed = self_test(pathlib.Path(argv[2]))
        for m in missed:
            print("check_editions: self-test:", m)
        return 1 if missed else 0
    if len(argv) != 2:
        sys.exit(__doc__)
    root = pathlib.Path(argv[1])
    problems = check(root)
    for p in problems:
        print("check_editions:", p)
    pairs = sum(1 for pattern in NEEDS_KOREAN for p in root.glob(pattern) if not p.name.endswith(".ko.md"))
    print(f"check_editions: {pairs} pages, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
