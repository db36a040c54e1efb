# SPDX-License-Identifier: MIT
"""tools/paste_results.py pastes one run into both editions of a chapter (ctest docs.paste_results).

Usage: python3 tests/tools/paste_results_test.py <repo root>
On a made-up results JSON and a chapter pair in a temporary folder: every block
lands byte-equal in README.md and README.ko.md, a table keeps its title as a
caption line, a Korean edition asking for a block the run lacks leaves both
files untouched, and a chapter without a Korean edition is pasted alone.
"""
import json
import pathlib
import subprocess
import sys
import tempfile

root = pathlib.Path(sys.argv[1])
paster = root / "tools" / "paste_results.py"
failures = []


def expect(what, ok, detail=""):
    print(f"paste_results_test: {'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f": {detail}"))
    if not ok:
        failures.append(what)


RESULTS = {
    "machine": {"date_utc": "2026-12-01T00:00:00Z", "cpu": "Test CPU", "cpu_threads": 2, "git_commit": "abc1234"},
    "settings": {"model": "tiny"},
    "verdict": "one claim held.",
    "claims": [{"held": True, "statement": "blocks are equal", "evidence": "2 of 2"}],
    "tables": [{"name": "latency", "title": "Request latency (vLLM definitions)", "columns": ["metric", "ms"],
                "precision": [0, 2], "rows": [["TTFT", 1.5], ["TPOT", 2.25]], "note": "A note."}],
}
CHAPTER = "# Lab\n\n<!-- results:machine -->\n<!-- /results -->\n\n## Run\n\n<!-- results:latency -->\n" \
          "old\n<!-- /results -->\n\n<!-- results:verdict -->\n<!-- /results -->\n"
KOREAN = CHAPTER.replace("# Lab", "# 실습").replace("## Run", "## 실행하기")


def paste(folder):
    return subprocess.run([sys.executable, str(paster), str(folder / "results.json"), str(folder / "README.md")],
                          capture_output=True, text=True, timeout=60)


with tempfile.TemporaryDirectory() as tmp:
    d = pathlib.Path(tmp)
    (d / "results.json").write_text(json.dumps(RESULTS))
    (d / "README.md").write_text(CHAPTER)
    (d / "README.ko.md").write_text(KOREAN)
    run = paste(d)
    english, korean = (d / "README.md").read_text(), (d / "README.ko.md").read_text()
    expect("pastes both editions", run.returncode == 0 and "README.ko.md" in run.stdout, run.stdout + run.stderr)
    expect("the pasted blocks are byte-equal in both editions",
           english.replace("# Lab", "").replace("## Run", "") == korean.replace("# 실습", "").replace("## 실행하기", ""))
    expect("a table keeps its title as a caption line",
           "<!-- results:latency -->\n*Request latency (vLLM definitions)*\n\n| metric | ms |" in english, english)
    expect("the numbers are the lab's digits", "| TPOT | 2.25 |" in english and "old" not in english, english)
    expect("the machine line and the claims are pasted", "on Test CPU (2 threads)" in korean
           and "- **held:** blocks are equal: 2 of 2" in korean, korean)

    (d / "README.ko.md").write_text(KOREAN.replace("results:verdict", "results:not_in_run"))
    before = (d / "README.md").read_text(), (d / "README.ko.md").read_text()
    run = paste(d)
    expect("a Korean block the run lacks fails, naming it", run.returncode != 0 and "not_in_run" in run.stderr,
           run.stderr)
    expect("and leaves both editions as they were", before == ((d / "README.md").read_text(),
                                                              (d / "README.ko.md").read_text()))

    (d / "README.ko.md").unlink()
    (d / "README.md").write_text(CHAPTER)
    run = paste(d)
    expect("a chapter without a Korean edition is pasted alone",
           run.returncode == 0 and "pasted 3 blocks" in run.stdout and not (d / "README.ko.md").exists(), run.stdout)

print(f"paste_results_test: {len(failures)} failed")
sys.exit(1 if failures else 0)
