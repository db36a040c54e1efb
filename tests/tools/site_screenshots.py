# SPDX-License-Identifier: MIT
"""The built course site as a learner sees it: headless Chromium renders its pages.

Usage: python3 tests/tools/site_screenshots.py HTML_DIR OUT

For the main page, lab 04's chapter, the glossary and the student's guide, in
English and in Korean where the Korean edition exists, it checks that
- the side navigation, once its script has run, lists every lab chapter
  (lab01 ... lab07) in order, and the page's previous/next bar is there;
- every Hangul or CJK character in the rendered page's text has a font that
  draws it (fontconfig's charset), so none shows as an empty box;
- the Korean text is drawn with that font: a render with every Hangul font
  hidden from Chromium (a fontconfig file rejecting them) differs from the
  normal render.
Screenshots go to OUT/<page>.png (and OUT/<page>.nocjk.png). Exits 77 (SKIP)
when no Chromium is installed, 1 listing each problem.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
from check_site import finish  # noqa: E402  (the site checker's report format)

PAGES = ["index", "mainpage_ko", "lab04", "lab04_ko", "glossary", "glossary_ko", "student", "student_ko"]
CJK = re.compile(r"[\u1100-\u11ff\u3000-\u9fff\uac00-\ud7a3\uf900-\ufaff\uff00-\uffef]")
NAV = re.compile(r'<div id="nav-tree-contents">(.*?)<div id="splitbar"', re.S)


def chromium():
    for name in ["chromium", "chromium-browser", "google-chrome"]:
        if shutil.which(name):
            return shutil.which(name)
    return None


def run_chromium(browser, out, url, args, env=None):
    # Root needs --no-sandbox; the virtual time budget lets the navigation script finish before the capture.
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               f"--user-data-dir={out / 'profile'}", "--virtual-time-budget=4000", *args, url]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    if result.returncode != 0:
        sys.exit(f"site_screenshots.py: chromium failed on {url}: {result.stderr[-500:]}")
    return result.stdout


def uncovered(chars):
    """The characters of @p chars no installed font draws (fontconfig's view, which Chromium uses)."""
    def covered(subset):
        pattern = ":charset=" + " ".join(f"{ord(c):x}" for c in subset)
        return bool(subprocess.run(["fc-list", pattern, "file"], capture_output=True, text=True).stdout.strip())
    if not chars or covered(chars):
        return []
    return [c for c in chars if not covered([c])]


def no_cjk_fonts(out):
    """A fontconfig file that hides every font drawing Hangul, for the render without them."""
    files = subprocess.run(["fc-list", ":charset=ac00", "file"], capture_output=True, text=True).stdout.split()
    globs = "".join(f"<glob>{f.rstrip(':')}</glob>" for f in files)
    conf = out / "no-cjk.conf"
    conf.write_text('<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n'
                    '  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>\n'
                    f"  <selectfont><rejectfont>{globs}</rejectfont></selectfont>\n"
                    f"  <cachedir>{out / 'fc-cache'}</cachedir>\n</fontconfig>\n")
    return dict(os.environ, FONTCONFIG_FILE=str(conf))


def main(html_dir, out):
    browser = chromium()
    if not browser:
        print("site_screenshots.py: SKIP: no Chromium (apt-get install chromium)")
        return 77
    if not shutil.which("fc-list"):
        print("site_screenshots.py: SKIP: no fontconfig (fc-list)")
        return 77
    out.mkdir(parents=True, exist_ok=True)
    problems, hidden, shown = [], None, []
    for name in PAGES:
        page = html_dir / f"{name}.html"
        if not page.is_file():
            if not name.endswith("_ko") or name == "student_ko":
                problems.append(f"{page} is missing")
            continue
        url = page.resolve().as_uri()
        dom = run_chromium(browser, out, url, ["--dump-dom"])
        nav = NAV.search(dom)
        # Every page shows the English chapters; a Korean page also opens the Korean section's chapters.
        expected = [f"lab0{n}" for n in range(1, 8)]
        if name.endswith("_ko"):
            expected += [f"lab0{n}_ko" for n in range(1, 8) if (html_dir / f"lab0{n}_ko.html").is_file()]
        links = re.findall(r'href="(lab0\d(?:_ko)?)\.html"', nav.group(1)) if nav else []
        labs = [l for i, l in enumerate(links) if l not in links[:i]]
        if labs != expected:
            problems.append(f"{name}: the rendered side navigation lists {labs or 'no chapter'}, not {expected}")
        if 'class="site-nav"' not in dom:
            problems.append(f"{name}: no previous/next bar")
        text = re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", dom, flags=re.S))
        chars = sorted(set(CJK.findall(text)))
        missing = uncovered(chars)
        if missing:
            problems.append(f"{name}: no installed font draws {''.join(missing[:20])} (install fonts-noto-cjk)")
        shot = out / f"{name}.png"
        run_chromium(browser, out, url, [f"--screenshot={shot}", "--window-size=1280,1400"])
        shown.append(shot.name)
        if chars and not missing:
            hidden = hidden or no_cjk_fonts(out)
            bare = out / f"{name}.nocjk.png"
            run_chromium(browser, out, url, [f"--screenshot={bare}", "--window-size=1280,1400"], env=hidden)
            if bare.read_bytes() == shot.read_bytes():
                problems.append(f"{name}: the render does not change without the CJK font: its Korean is not drawn "
                                "with it")
        print(f"site_screenshots.py: {name}: {len(labs)} chapters in the navigation, {len(chars)} distinct "
              f"CJK characters, {len(missing)} without a font")
    return finish("site_screenshots.py", problems, f"{len(shown)} pages rendered into {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])))
