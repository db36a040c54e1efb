# SPDX-License-Identifier: MIT
"""Checks a built course site: every lab chapter is a page, every figure it embeds is there.

Usage: python3 tools/check_site.py ROOT HTML_DIR
Exits 1 listing each missing page, link or image.
"""
import pathlib
import re
import sys

IMAGE = re.compile(r"!\[[^\]]*\]\(figures/([\w.-]+)\)")


def main(root, html):
    missing = []
    index = html / "index.html"
    index_text = index.read_text() if index.is_file() else ""
    if not index_text:
        missing.append(f"{index} (the main page)")
    for page in ["glossary.html", "sources.html", "concept_roofline.html", "concept_kv_formula.html",
                 "concept_metrics.html"]:
        if not (html / page).is_file():
            missing.append(str(html / page))
    labs = sorted(p for p in (root / "labs").glob("[0-9][0-9]_*") if (p / "README.md").is_file())
    for lab in labs:
        label = f"lab{lab.name[:2]}"
        page = html / f"{label}.html"
        if not page.is_file():
            missing.append(f"{page} (chapter {lab.name})")
            continue
        if f'href="{label}.html"' not in index_text:
            missing.append(f"a link from the main page to {label}.html")
        text = page.read_text()
        for figure in IMAGE.findall((lab / "README.md").read_text()):
            name = f"{label}_{figure}"
            if not (html / name).is_file():
                missing.append(f"{html / name} (figure of {lab.name})")
            elif f'src="{name}"' not in text:
                missing.append(f"{page} does not show {name}")
    for m in missing:
        print(f"check_site.py: missing: {m}", file=sys.stderr)
    print(f"check_site.py: {len(labs)} chapters checked, {len(missing)} problem(s)")
    return 1 if missing else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()))
