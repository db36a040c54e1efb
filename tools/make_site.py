# SPDX-License-Identifier: MIT
"""Lays out the course site's pages for Doxygen (scripts/docs.sh runs it, then Doxygen).

Usage: python3 tools/make_site.py ROOT OUT

Writes OUT/pages/: the main page (docs/mainpage.md, with the ladder of labs
filled in from the labs/ folders), one page per lab chapter
(labs/NN_*/README.md, labelled labNN), the glossary, the sources, the concept
pages (docs/concepts/), the bad-input table, and taught_in.dox, which links
each engine header a chapter names back to that chapter. Figures are copied
to OUT/pages/images/ as labNN_<name>.png, since labs reuse file names
(step_time.png). Chapters stay plain Markdown that GitHub renders; only the
copies change. Exits 1 naming the chapter and file when a chapter embeds a
figure that does not exist.
"""
import pathlib
import re
import shutil
import sys

IMAGE = re.compile(r"!\[([^\]]*)\]\(figures/([\w.-]+)\)")
HEADER = re.compile(r"`(engine/[\w/]+\.h)`")


def doxygen_name(path):
    """A header's name as Doxygen resolves it: relative to engine/, as the code includes it (kernels/gemm.h)."""
    return path.removeprefix("engine/")


def chapter_title(text, path):
    first = text.splitlines()[0] if text else ""
    if not first.startswith("# "):
        sys.exit(f"make_site.py: {path}: the first line must be the chapter's '# ' title")
    return first[2:].strip()


def main(root, out):
    pages, images = out / "pages", out / "pages" / "images"
    if pages.exists():
        shutil.rmtree(pages)
    images.mkdir(parents=True)
    labs = sorted(p for p in (root / "labs").glob("[0-9][0-9]_*") if (p / "README.md").is_file())
    taught = {}  # header -> labels of the chapters that name it
    ladder = ["| lab | chapter | grade it |", "|---|---|---|"]
    for lab in labs:
        num, chapter = lab.name[:2], lab / "README.md"
        text = chapter.read_text()
        title = chapter_title(text, chapter)
        label = f"lab{num}"

        def image(match):
            source = lab / "figures" / match.group(2)
            if not source.is_file():
                sys.exit(f"make_site.py: {chapter}: embeds figures/{match.group(2)}, which does not exist")
            shutil.copy(source, images / f"{label}_{match.group(2)}")
            return f"![{match.group(1)}]({label}_{match.group(2)})"

        def header(match):
            path = match.group(1)
            if not (root / path).is_file():
                return match.group(0)
            taught.setdefault(path, []).append(label)
            return f'@ref {doxygen_name(path)} "{path}"'

        body = "\n".join(text.splitlines()[1:])
        body = HEADER.sub(header, IMAGE.sub(image, body))
        (pages / f"{label}.md").write_text(f"# {title} {{#{label}}}\n{body}\n")
        ladder.append(f"| {num} | @subpage {label} | `ctest --test-dir build -L {label}` |")

    main_page = (root / "docs" / "mainpage.md").read_text()
    if "<!-- site:ladder -->" not in main_page:
        sys.exit("make_site.py: docs/mainpage.md has no <!-- site:ladder --> marker")
    (pages / "mainpage.md").write_text(main_page.replace("<!-- site:ladder -->", "\n".join(ladder)))
    # A page's Korean edition (X.ko.md) is not a page of its own here: the language switch pairs it with X.md.
    concepts = sorted(p for p in (root / "docs" / "concepts").glob("*.md") if not p.name.endswith(".ko.md"))
    for page in ["glossary.md", "sources.md", *(f"concepts/{p.name}" for p in concepts)]:
        shutil.copy(root / "docs" / page, pages / pathlib.Path(page).name)
    # The bad-input table is generated (tools/bad_input_table.py); its page label is added here.
    bad = (root / "docs" / "bad_inputs.md").read_text()
    (pages / "bad_inputs.md").write_text(f"# {chapter_title(bad, 'docs/bad_inputs.md')} {{#bad_inputs}}\n" +
                                         "\n".join(bad.splitlines()[1:]) + "\n")

    # Each header a chapter names gets a line in its own documentation pointing back to the chapters.
    with open(pages / "taught_in.dox", "w") as dox:
        for path, labels in sorted(taught.items()):
            refs = ", ".join(f'@ref {l} "Lab {l[3:]}"' for l in sorted(set(labels)))
            dox.write(f"/** @file {doxygen_name(path)}\n * <b>Taught in</b> {refs}.\n */\n")
    print(f"make_site.py: {len(labs)} chapters, {len(list(images.iterdir()))} figures, "
          f"{len(taught)} headers linked back, in {pages}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve())
