# SPDX-License-Identifier: MIT
"""Tests `grade.py --answers` and the engine's answer key (ctest label 'tools').

Usage: python3 tests/tools/answers_test.py <repo root> <answer_key executable>
Grades answer files of known content (right, wrong, missing, malformed)
against a small key, then checks the real key against answers worked out by
hand from the chapters' formulas.
"""
import json
import math
import pathlib
import subprocess
import sys
import tempfile

root, answer_key = pathlib.Path(sys.argv[1]), sys.argv[2]
grade = root / "tools" / "grade.py"
failures = []


def expect(what, condition, detail=""):
    if not condition:
        failures.append(f"{what} {detail}")


KEY = {"questions": [
    {"id": "02.kv_gb", "lab": 2, "text": "KV in GB", "answer": 2.68435456, "rel_tolerance": 0.01},
    {"id": "04.blocks", "lab": 4, "text": "blocks", "answer": 5, "rel_tolerance": 0},
]}


def run(answers_text, labs="all", key=KEY):
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        (d / "key.json").write_text(key if isinstance(key, str) else json.dumps(key))
        (d / "answers.txt").write_text(answers_text)
        r = subprocess.run([sys.executable, str(grade), "--answers", str(d / "answers.txt"), "--key",
                            str(d / "key.json"), "--labs", labs, "--json", str(d / "report.json")],
                           capture_output=True, text=True, timeout=60)
        report = json.loads((d / "report.json").read_text()) if (d / "report.json").is_file() else None
        return r, report


def results(report):
    return {q["id"]: q["result"] for q in report["questions"]} if report else None


# Right: within 1% of 2.684 and exactly 5, with comments, blank lines and spaces around '='.
r, rep = run("# my answers\n\n02.kv_gb = 2.7\n  04.blocks=5\n")
expect("right answers exit 0", r.returncode == 0, r.stdout + r.stderr)
expect("right answers are right", results(rep) == {"02.kv_gb": "right", "04.blocks": "right"}, rep)
expect("the table shows the score", "answers: 2 of 2 right" in r.stdout, r.stdout)
# Wrong: 2.5 is 7% off; an exact question takes no rounding.
r, rep = run("02.kv_gb = 2.5\n04.blocks = 5.5\n")
expect("wrong answers exit 1", r.returncode == 1, r.stdout + r.stderr)
expect("wrong answers are wrong", results(rep) == {"02.kv_gb": "wrong", "04.blocks": "wrong"}, rep)
# Missing: a question with no line scores nothing and is listed.
r, rep = run("04.blocks = 5\n")
expect("a missing answer exits 1", r.returncode == 1, r.stdout)
expect("a missing answer is missing", results(rep) == {"02.kv_gb": "missing", "04.blocks": "right"}, rep)
# --labs grades the selected chapters only.
r, rep = run("04.blocks = 5\n", labs="04")
expect("--labs 04 ignores lab 02's question", r.returncode == 0 and results(rep) == {"04.blocks": "right"}, rep)
# Malformed: one error naming the file, the line and what was expected; exit 2, no report.
for text, line, words in [("02.kv_gb 2.7\n", 1, "expected 'id = number'"),
                          ("\n02.kv_gb = about 3\n", 2, "expected a finite number"),
                          ("02.kv_gb = nan\n", 1, "expected a finite number"),
                          ("02.kv_gb = 1_000\n", 1, "expected a finite number"),
                          ("02.kv_gb = 2.7\n02.kv_gb = 2.6\n", 2, "answered again (first at line 1)"),
                          ("# x\n03.nope = 1\n", 2, "unknown question id '03.nope'")]:
    r, rep = run(text)
    expect(f"malformed {text!r} exits 2", r.returncode == 2 and rep is None, r.stdout + r.stderr)
    expect(f"malformed {text!r} names answers.txt:{line} and says {words!r}",
           f"answers.txt:{line}:" in r.stderr and words in r.stderr and r.stderr.count("\n") == 1, r.stderr)
r, _ = run("", key='{"questions": [{"id": 1}]}')
expect("a malformed key exits 2 naming --key", r.returncode == 2 and "--key" in r.stderr, r.stderr)

# The real key, from the engine, against the chapters' formulas worked by hand.
key = json.loads(subprocess.run([answer_key], capture_output=True, text=True, timeout=120, check=True).stdout)
answer = {q["id"]: q["answer"] for q in key["questions"]}
expect("ids are unique", len(answer) == len(key["questions"]))
labs = {int(p.name[:2]) for p in (root / "labs").glob("[0-9][0-9]_*")}
expect("every lab asks a question", {q["lab"] for q in key["questions"]} == labs, sorted(labs))
expect("every question has its text", all(q["text"].strip() for q in key["questions"]))
# Each chapter prints its questions (answer_key --lab NN pastes them).
for q in key["questions"]:
    chapter = next((root / "labs").glob(f"{q['lab']:02d}_*")) / "README.md"
    expect(f"{chapter.relative_to(root)} asks {q['id']}",
           f"`{q['id']}`: {q['text']}" in chapter.read_text())
by_hand = {
    "01.rows_without_cache": 400 * 29 + 400 * 399 / 2,   # sum over k of (P + k - 1)
    "01.rows_saved_by_cache": 400 * 29 + 400 * 399 / 2 - (29 + 399),
    "02.kv_llama70b_8k_gb": 2 * 80 * 8 * 128 * 8192 * 2 / 1e9,
    "02.kv_llama70b_mha_factor": 64 / 8,
    "03.intensity_gemm_256": 2 * 256 * 4096 * 4096 / (2 * (4096 * 4096 + 2 * 256 * 4096)),
    # M·4096 / (4096 + 2M) >= 989e12 / 3350e9, solved for the smallest whole M
    "03.decode_batch_at_h100_ridge": math.ceil(989e12 / 3350e9 * 4096 / (4096 - 2 * 989e12 / 3350e9)),
    # Llama-3-8B's 8,030,261,248 parameters in bf16 but the embedding (one row read) and the f32 norms
    "03.llama8b_h200_decode_tokens_per_s":
        4800e9 / (2 * (8030261248 - 128256 * 4096 - (32 * 2 * 4096 + 4096)) + 4 * (32 * 2 * 4096 + 4096)),
    "04.blocks_for_5_2_7": 2 + 1 + 2,
    "04.first_refused_of_5_2_7": 3,                      # 2 + 1 blocks taken, 1 left, 7 tokens need 2
    "05.paper_standard_over_flash": (4096 * 64 + 4096 ** 2) / (4096 ** 2 * 64 ** 2 / 25000),
    "06.prefill_steps_alone": 6,                         # ceil(3000 / 512)
    "06.prefill_steps_beside_16": 7,                     # ceil(3000 / (512 - 16))
    "07.kv_llama8b_2048_mb": 2 * 32 * 8 * 128 * 2048 * 2 / 1e6,
    "07.kv_llama8b_2048_ib_hdr_ms": 2 * 32 * 8 * 128 * 2048 * 2 / 25e9 * 1e3,
}
for qid, value in by_hand.items():
    expect(f"{qid}: key {answer.get(qid)} equals the hand-worked {value}",
           qid in answer and abs(answer[qid] - value) <= 1e-9 * abs(value))
# The key graded against itself is all right (the answer file format round-trips).
with tempfile.TemporaryDirectory() as d:
    (pathlib.Path(d) / "key.json").write_text(json.dumps(key))
    (pathlib.Path(d) / "a.txt").write_text("".join(f"{q['id']} = {q['answer']!r}\n" for q in key["questions"]))
    r = subprocess.run([sys.executable, str(grade), "--answers", f"{d}/a.txt", "--key", f"{d}/key.json"],
                       capture_output=True, text=True, timeout=60)
    expect("the key's own answers are all right", r.returncode == 0, r.stdout + r.stderr)

for f in failures:
    print("FAILED:", f)
print(f"answers_test: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
