# SPDX-License-Identifier: MIT
"""Tests tools/claims.py (ctest tools.claims) on results JSON made here.

Usage: python3 tests/tools/claims_test.py <repo root>
Two labs' results, one claim held and one not (with its cause and a pipe in
its evidence), become one table with a machine line per lab; bad results are
refused with one error naming the file or the flag.
"""
import json
import pathlib
import subprocess
import sys
import tempfile

root = pathlib.Path(sys.argv[1])
tool = root / "tools" / "claims.py"
failures = []


def expect(what, condition, detail=""):
    if not condition:
        failures.append(f"{what}: {detail}")


def lab_json(results, lab, claims, cpu="Test CPU"):
    folder = results / lab
    folder.mkdir(parents=True)
    (folder / f"{lab}.json").write_text(json.dumps({
        "lab": lab, "verdict": "v",
        "machine": {"cpu": cpu, "cpu_threads": 2, "git_commit": "abc1234", "date_utc": "2026-12-01T10:00:00Z"},
        "claims": claims}))


def claim(cid, held, evidence, cause=""):
    return {"id": cid, "source": "the KV cache article, §2-6", "statement": f"statement of {cid}", "held": held,
            "evidence": evidence, "cause": cause}


def run(results, out, *extra):
    return subprocess.run([sys.executable, str(tool), "--results", str(results), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=60)


with tempfile.TemporaryDirectory() as d:
    d = pathlib.Path(d)
    results, out = d / "results", d / "claims.md"
    lab_json(results, "01_autoregressive", [claim("01.a", True, "12 tokens")])
    lab_json(results, "03_roofline", [claim("03.b", False, "ridge 7.2 | prefill 5.1", "too few rows")], cpu="Other")
    (results / "03_roofline" / "extra.json").write_text("not read: not <lab>.json")
    r = run(results, out, "--note", "From --quick runs.")
    expect("a good run exits 0", r.returncode == 0, r.stderr)
    text = out.read_text() if out.is_file() else ""
    rows = [line for line in text.splitlines() if line.startswith("| statement of")]
    expect("one row per claim", len(rows) == 2, text)
    expect("a held claim reads held", any("`01.a`" in r and "| held |" in r for r in rows), rows)
    expect("a missed claim reads did not hold with its cause",
           any("`03.b`" in r and "| did not hold |" in r and "because too few rows" in r for r in rows), rows)
    expect("a pipe in the evidence is escaped", any("ridge 7.2 \\| prefill 5.1" in r for r in rows), rows)
    expect("every row has five cells", all(r.replace("\\|", "").count("|") == 6 for r in rows), rows)
    expect("the lab is named", any("| 03_roofline |" in r for r in rows), rows)
    expect("the note is written", "From --quick runs." in text, text)
    expect("the totals are counted", "2 claims from 2 labs: 1 held, 1 did not hold." in text, text)
    expect("each lab has a machine line",
           "- 01_autoregressive: 2026-12-01 on Test CPU (2 threads), commit abc1234" in text
           and "- 03_roofline: 2026-12-01 on Other" in text, text)

    # A claim that did not hold must carry its cause; one missing a field is refused.
    bad = d / "bad"
    lab_json(bad, "02_kv_cache", [claim("02.c", False, "x")])
    r = run(bad, d / "bad.md")
    expect("a miss without a cause is refused", r.returncode != 0 and "02.c" in r.stderr, r.stderr)
    broken = d / "broken"
    lab_json(broken, "02_kv_cache", [{"id": "02.d", "held": True}])
    r = run(broken, d / "broken.md")
    expect("a claim missing fields is refused", r.returncode != 0 and "claim 0 has no source" in r.stderr, r.stderr)
    r = run(d / "empty-does-not-exist", d / "none.md")
    expect("a missing results folder names --results", r.returncode != 0 and "--results" in r.stderr, r.stderr)
    (d / "empty").mkdir()
    r = run(d / "empty", d / "none.md")
    expect("a results folder with no lab JSON is refused", r.returncode != 0 and "no <lab>/<lab>.json" in r.stderr,
           r.stderr)

for f in failures:
    print("claims_test:", f)
print(f"claims_test: {len(failures)} failures")
sys.exit(1 if failures else 0)
