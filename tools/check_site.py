# SPDX-License-Identifier: MIT
"""Checks a built course site (scripts/docs.sh runs it after Doxygen).

Usage: python3 tools/check_site.py ROOT HTML_DIR

It finds the pages from the source tree itself, not from tools/make_site.py,
so a page the layout forgets is caught:
- every lab chapter, concept page, the glossary, the sources and the student's
  guide, and the Korean edition of each that has one (X.ko.md), is a page and
  is in the side navigation, in order (labs 01-07, concepts, glossary,
  sources; the Korean pages in the same order), with a previous/next bar
  linking its neighbours there, and a language switch to its other edition;
- no @verbatim block (a <pre class="fragment">) keeps a comment's `*` column;
- no Markdown markup shows as literal characters (**bold**, `code`, [a](b))
  in a page's text outside code;
- every image and every internal link (file and #anchor) of every page exists.
Exits 1 listing each problem.
"""
import html
import pathlib
import re
import sys

NAV_LINK = re.compile(r'\[ "[^"]*", "([\w.-]+\.html)(?:#[\w-]*)?"')
REF = re.compile(r'(href|src)="([^"]*)"')
ANCHOR = re.compile(r'(?:id|name)="([^"]+)"')
PRE = re.compile(r'<pre class="fragment">(.*?)</pre>', re.S)
SITE_NAV = re.compile(r'<div class="site-nav">(.*?)</div>', re.S)
# Text of a page outside code, scripts and tags; where Markdown markup left unconverted would show.
HIDDEN = re.compile(r"<(pre|code|script|style|div class=\"fragment\")[^>]*>.*?</\1>|<div class=\"line\">.*?</div>", re.S)
TAG = re.compile(r"<[^>]+>")
# In the text left when code is replaced by a word and tags are dropped, any of these is markup Doxygen did
# not convert (a bold it could not close, a code span it read as TeX quoting, a link it did not resolve).
LITERAL = [(re.compile(r".{0,30}\*\*.{0,30}"), "**bold**"), (re.compile(r".{0,30}`.{0,30}"), "`code`"),
           (re.compile(r".{0,30}\]\(.{0,30}"), "[link](target)")]


def expected_pages(root):
    """(label, source) of every page the navigation must list, in order: English, then Korean."""
    docs = root / "docs"
    order = [("student", docs / "student.md")]
    order += [(f"lab{p.parent.name[:2]}", p) for p in sorted((root / "labs").glob("[0-9][0-9]_*/README.md"))]
    concepts = [p for p in sorted((docs / "concepts").glob("*.md")) if not p.name.endswith(".ko.md")]
    order += [(f"concept_{p.stem}", p) for p in concepts]
    order += [("glossary", docs / "glossary.md"), ("sources", docs / "sources.md")]
    english = [(label, src) for label, src in order if src.is_file()]
    korean = [(f"{label}_ko", src.with_name(src.stem + ".ko.md")) for label, src in english]
    return english, [(label, src) for label, src in korean if src.is_file()]


def nav_order(html_dir):
    """The HTML files the side navigation lists, in its order (navtreedata.js)."""
    nav = html_dir / "navtreedata.js"
    return NAV_LINK.findall(nav.read_text()) if nav.is_file() else []


def check_navigation(root, html_dir, problems):
    english, korean = expected_pages(root)
    listed = nav_order(html_dir)
    if not listed:
        problems.append(f"{html_dir / 'navtreedata.js'}: no side navigation")
    mainpage_ko = (root / "docs" / "mainpage.ko.md").is_file()
    for edition, contents in [(english, "index.html"), (korean, "mainpage_ko.html" if mainpage_ko else None)]:
        positions = []
        for label, src in edition:
            page = html_dir / f"{label}.html"
            if not page.is_file():
                problems.append(f"{page}: missing (the page of {src.relative_to(root)})")
                continue
            if f"{label}.html" not in listed:
                problems.append(f"{label}.html ({src.relative_to(root)}) is not in the side navigation")
            else:
                positions.append((listed.index(f"{label}.html"), label))
        if [l for _, l in sorted(positions)] != [l for _, l in positions]:
            problems.append("the side navigation lists the pages out of order: " +
                            ", ".join(l for _, l in sorted(positions)) + "; expected " +
                            ", ".join(l for _, l in positions))
        # Neighbours in the navigation must link each other from the previous/next bar.
        in_nav = [l for _, l in sorted(positions)]
        for i, label in enumerate(in_nav):
            bars = SITE_NAV.findall((html_dir / f"{label}.html").read_text())
            if not bars:
                problems.append(f"{label}.html has no previous/next bar")
                continue
            for j in (i - 1, i + 1):
                if 0 <= j < len(in_nav) and f'href="{in_nav[j]}.html' not in bars[0]:
                    problems.append(f"{label}.html: its previous/next bar does not link {in_nav[j]}.html")
            if contents and label != contents[:-5] and f'href="{contents}' not in bars[0]:
                problems.append(f"{label}.html: its previous/next bar does not link the contents ({contents})")
    for label, _ in korean:
        english_label = label[:-3]
        for page, other in [(english_label, label), (label, english_label)]:
            path = html_dir / f"{page}.html"
            bars = SITE_NAV.findall(path.read_text()) if path.is_file() else []
            if path.is_file() and not any(f'href="{other}.html' in bar for bar in bars):
                problems.append(f"{page}.html has no language switch to {other}.html")


def check_page(html_dir, page, anchors, problems):
    text = page.read_text(errors="replace")
    for block in PRE.findall(text):
        lines = [l for l in html.unescape(block).splitlines() if l.strip()]
        if lines and sum(l.lstrip().startswith("*") for l in lines) * 2 > len(lines):
            problems.append(f"{page.name}: a verbatim block keeps the comment's '*' column: {lines[0].strip()[:60]!r}")
    body = text.split('<div class="contents">', 1)[-1]
    visible = html.unescape(TAG.sub("", HIDDEN.sub("x", body)))
    for pattern, name in LITERAL:
        for match in pattern.findall(visible):
            problems.append(f"{page.name}: Markdown {name} shows as literal text: {match.strip()!r}")
    for kind, target in REF.findall(text):
        if re.match(r"^(https?:|mailto:|javascript:|data:|//)", target) or target in ("", "#"):
            continue
        path, _, anchor = html.unescape(target).partition("#")
        file = (page.parent / path) if path else page
        if not file.resolve().is_file():
            problems.append(f"{page.name}: {'image' if kind == 'src' else 'link'} {target} is missing")
        elif anchor and file.suffix == ".html" and anchor not in anchors(file):
            problems.append(f"{page.name}: link {target}: no anchor #{anchor} in {file.name}")


def main(root, html_dir):
    problems = []
    if not (html_dir / "index.html").is_file():
        problems.append(f"{html_dir / 'index.html'} (the main page) is missing")
    check_navigation(root, html_dir, problems)
    cache = {}

    def anchors(file):
        if file not in cache:
            cache[file] = set(ANCHOR.findall(file.read_text(errors="replace")))
        return cache[file]

    pages = sorted(html_dir.glob("*.html"))
    for page in pages:
        check_page(html_dir, page, anchors, problems)
    return finish("check_site.py", problems, f"{len(pages)} HTML pages checked")


def finish(tool, problems, summary):
    """Prints each problem on stderr and the summary line; the exit status: 1 when there is a problem."""
    for p in problems:
        print(f"{tool}: {p}", file=sys.stderr)
    print(f"{tool}: {summary}, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()))
