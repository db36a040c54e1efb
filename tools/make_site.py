# SPDX-License-Identifier: MIT
"""Lays out the course site's pages for Doxygen (scripts/docs.sh runs it, then Doxygen).

Usage: python3 tools/make_site.py ROOT OUT

Writes OUT/pages/: one page per course page in reading order -- the main
page (docs/mainpage.md, its ladder of labs filled in from the labs/
folders), the student's guide, the lab chapters (labs/NN_*/README.md,
labelled labNN), the concept pages, the glossary and the sources, then the
engineering pages -- each with a previous/next bar at its top and bottom.
A page with a Korean sibling (X.ko.md beside X.md) gets a language switch,
and the Korean pages form their own section in the same order (label
<label>_ko), with their own previous/next. OUT/pages/layout.xml is the side
navigation listing every page in that order; taught_in.dox links each
engine header a chapter names back to the chapter. Figures are copied to
OUT/pages/images/ as labNN_<name>.png, since labs reuse file names
(step_time.png). Chapters stay plain Markdown that GitHub renders; only the
copies change. Exits 1 naming the page and file when a page embeds a figure
that does not exist.
"""
import dataclasses
import html
import pathlib
import re
import shutil
import sys

IMAGE = re.compile(r"!\[([^\]]*)\]\(figures/([\w.-]+)\)")
HEADER = re.compile(r"`(engine/[\w/]+\.h)`")
LABEL = re.compile(r"\s*\{#(\w+)\}\s*$")
REF = re.compile(r"@(?:ref|subpage) (\w+)")
CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
MD_LINK = re.compile(r"\[([^\]\n]+)\]\(([\w./-]+\.md)\)")
ENGINEERING = ["engineering", "site", "serving", "bad_inputs", "claims"]


@dataclasses.dataclass
class Page:
    """One page of the site: where its text comes from and where it sits."""
    label: str  # Doxygen page name: the HTML file is <label>.html (mainpage: index.html)
    source: pathlib.Path  # the English Markdown
    section: str  # "Course" or "Engineering": its group in the side navigation
    chapter: bool = False  # a lab chapter: figures and engine headers are linked

    def korean(self):
        """The Korean edition beside the English one (README.ko.md, student.ko.md), or None."""
        path = self.source.with_name(self.source.stem + ".ko.md")
        return path if path.is_file() else None


def site_pages(root):
    """The English pages in reading order: main page, guide, labs 01-07, concepts, glossary, sources, engineering."""
    docs = root / "docs"
    pages = [Page("mainpage", docs / "mainpage.md", "Course"), Page("student", docs / "student.md", "Course")]
    for lab in sorted(p for p in (root / "labs").glob("[0-9][0-9]_*") if (p / "README.md").is_file()):
        pages.append(Page(f"lab{lab.name[:2]}", lab / "README.md", "Course", chapter=True))
    concepts = [p for p in sorted((docs / "concepts").glob("*.md")) if not p.name.endswith(".ko.md")]
    pages += [Page(f"concept_{p.stem}", p, "Course") for p in concepts]
    pages += [Page("glossary", docs / "glossary.md", "Course"), Page("sources", docs / "sources.md", "Course")]
    pages += [Page(name, docs / f"{name}.md", "Engineering") for name in ENGINEERING]
    return [p for p in pages if p.source.is_file()]


def split_title(text, path):
    """The page's '# ' title (without a {#label}) and the body after it."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        sys.exit(f"make_site.py: {path}: the first line must be the page's '# ' title")
    return LABEL.sub("", lines[0][2:]).strip(), "\n".join(lines[1:])


def link_text(title):
    """A title as the text of a link: no backticks, no double quotes (they end Doxygen's link text)."""
    return title.replace("`", "").replace('"', "'")


def quote_safe(body):
    """Doxygen 1.9 reads a one-backtick span holding a quote before a non-letter (`is 'x': y`) as TeX quoting
    (`foo'), and the span, or a whole table, shows raw; two backticks mean the same code to GitHub and Doxygen."""
    lines, fenced = [], False
    for line in body.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            line = CODE_SPAN.sub(lambda m: f"`` {m.group(1)} ``" if "'" in m.group(1) else m.group(0), line)
        lines.append(line)
    return "\n".join(lines)


def ladder(root, korean_labels):
    """The main page's table of labs; in the Korean edition the chapters link to their Korean pages."""
    rows = ["| 실습 | 장 | 채점 |" if korean_labels is not None else "| lab | chapter | grade it |", "|---|---|---|"]
    for lab in sorted(p for p in (root / "labs").glob("[0-9][0-9]_*") if (p / "README.md").is_file()):
        label = f"lab{lab.name[:2]}"
        target = f"{label}_ko" if korean_labels is not None and label in korean_labels else label
        rows.append(f"| {lab.name[:2]} | @ref {target} | `ctest --test-dir build -L {label}` |")
    return "\n".join(rows)


def nav_bar(sequence, i, contents, switch):
    """The previous/next bar: the page before, the contents, the page after, and the other language."""
    parts = []
    if i > 0:
        parts.append(f'@ref {sequence[i - 1][0]} "← {link_text(sequence[i - 1][1])}"')
    if sequence[i][0] != contents[0]:
        parts.append(f'@ref {contents[0]} "{contents[1]}"')
    if i + 1 < len(sequence):
        parts.append(f'@ref {sequence[i + 1][0]} "{link_text(sequence[i + 1][1])} →"')
    if switch:
        parts.append(f'@ref {switch[0]} "{switch[1]}"')
    return '<div class="site-nav">\n' + " &nbsp;·&nbsp; ".join(parts) + "\n</div>\n"


def write_layout(path, course, groups):
    """Doxygen's layout file: the side navigation. The course's pages sit at its top level, so every page shows
    them all; the engineering pages and the Korean edition are a group each, opened on their own pages."""
    def user(label, title, indent):
        return f'{indent}<tab type="user" url="@ref {label}" visible="yes" title="{html.escape(link_text(title), quote=False)}"/>'

    tabs = ['    <tab type="mainpage" visible="yes" title="Contents"/>']
    tabs += [user(label, title, "    ") for label, title in course]
    for title, entries in groups:
        tabs.append(f'    <tab type="usergroup" url="[none]" visible="yes" title="{html.escape(title, quote=False)}">')
        tabs += [user(label, t, "      ") for label, t in entries]
        tabs.append("    </tab>")
    for kind, subs in [("classes", ["classlist", "hierarchy", "classmembers"]), ("files", ["filelist", "globals"])]:
        tabs.append(f'    <tab type="{kind}" visible="yes" title="">')
        tabs += [f'      <tab type="{s}" visible="yes" title="" intro=""/>' for s in subs]
        tabs.append("    </tab>")
    path.write_text('<doxygenlayout version="1.0">\n  <navindex>\n' + "\n".join(tabs) + "\n  </navindex>\n"
                    "</doxygenlayout>\n")


def main(root, out):
    pages_dir, images = out / "pages", out / "pages" / "images"
    if pages_dir.exists():
        shutil.rmtree(pages_dir)
    images.mkdir(parents=True)
    pages = site_pages(root)
    if pages[0].label != "mainpage":
        sys.exit("make_site.py: docs/mainpage.md is missing")
    taught = {}  # header -> labels of the chapters that name it
    english = [(p.label, split_title(p.source.read_text(), p.source)[0]) for p in pages]
    korean = [(f"{p.label}_ko", split_title(p.korean().read_text(), p.korean())[0]) for p in pages if p.korean()]
    korean_labels = {label[:-3] for label, _ in korean}
    by_source = {p.source.resolve(): p.label for p in pages}
    by_source.update({p.korean().resolve(): f"{p.label}_ko" for p in pages if p.korean()})
    ko_contents = ("mainpage_ko", "목차") if "mainpage" in korean_labels else ("mainpage", "Contents")

    def render(page, source, label, sequence, contents, switch, lang_ko):
        title, body = split_title(source.read_text(), source)
        stem = page.label

        def image(match):
            figure = source.parent / "figures" / match.group(2)
            if not figure.is_file():
                sys.exit(f"make_site.py: {source}: embeds figures/{match.group(2)}, which does not exist")
            shutil.copy(figure, images / f"{stem}_{match.group(2)}")
            return f"![{match.group(1)}]({stem}_{match.group(2)})"

        def header(match):
            path = match.group(1)
            if not (root / path).is_file():
                return match.group(0)
            if not lang_ko:
                taught.setdefault(path, []).append(stem)
            return f'@ref {path.removeprefix("engine/")} "{path}"'

        def ref(match):
            # Subpages would nest pages under the main page; the navigation is the layout's instead.
            target = match.group(1)
            return f"@ref {target}_ko" if lang_ko and target in korean_labels else f"@ref {target}"

        def md_link(match):
            # A link to another page's Markdown (GitHub's way) becomes a link to its page; one to a file the site
            # does not show names the file instead of a link that goes nowhere.
            target = (source.parent / match.group(2)).resolve()
            if target in by_source:
                return f'@ref {by_source[target]} "{link_text(match.group(1))}"'
            shown = target.relative_to(root) if target.is_relative_to(root) else match.group(2)
            return f"{match.group(1)} (`{shown}`)"

        body = quote_safe(MD_LINK.sub(md_link, REF.sub(ref, IMAGE.sub(image, body))))
        if page.chapter:
            body = HEADER.sub(header, body)
        if page.label == "mainpage":
            if "<!-- site:ladder -->" not in body:
                sys.exit(f"make_site.py: {source} has no <!-- site:ladder --> marker")
            body = body.replace("<!-- site:ladder -->", ladder(root, korean_labels if lang_ko else None))
        i = [s[0] for s in sequence].index(label)
        bar = nav_bar(sequence, i, contents, switch)
        (pages_dir / f"{label}.md").write_text(f"# {title} {{#{label}}}\n\n{bar}\n{body.strip()}\n\n{bar}")

    for page in pages:
        switch = (f"{page.label}_ko", "한국어") if page.korean() else None
        render(page, page.source, page.label, english, ("mainpage", "Contents"), switch, False)
        if page.korean():
            render(page, page.korean(), f"{page.label}_ko", korean, ko_contents, (page.label, "English"), True)

    # The main page is the layout's own first tab.
    course = [(p.label, t) for p, (_, t) in zip(pages, english) if p.section == "Course" and p.label != "mainpage"]
    groups = [("Engineering", [(p.label, t) for p, (_, t) in zip(pages, english) if p.section == "Engineering"])]
    if korean:
        groups.append(("한국어", korean))
    write_layout(pages_dir / "layout.xml", course, groups)

    # Each header a chapter names gets a line in its own documentation pointing back to the chapters.
    with open(pages_dir / "taught_in.dox", "w") as dox:
        for path, labels in sorted(taught.items()):
            refs = ", ".join(f'@ref {l} "Lab {l[3:]}"' for l in sorted(set(labels)))
            dox.write(f"/** @file {path.removeprefix('engine/')}\n * <b>Taught in</b> {refs}.\n */\n")
    print(f"make_site.py: {len(english)} pages ({sum(p.chapter for p in pages)} chapters), {len(korean)} in "
          f"Korean, {len(list(images.iterdir()))} figures, {len(taught)} headers linked back, in {pages_dir}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve())
