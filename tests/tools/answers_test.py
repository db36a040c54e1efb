# SPDX-License-Identifier: MIT
"""Tests `grade.py --answers` and the engine's answer key (ctest label 'tools').

Usage: python3 tests/tools/answers_test.py <repo root> <answer_key executable>
Grades answer files of known content (right, wrong, missing, malformed)
against a small key and checks that the key stays hidden; checks that
`grade.sh --answers` runs in a copy of the tracked tree with no build and
no build tools; then checks the real key: the saved one equals what the
engine computes now, every chapter lists its questions, and the answers
equal ones worked out by hand from the chapters' formulas.
"""
import json
import math
import os
import pathlib
import re
import shutil
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


def run(answers_text, labs="all", key=KEY, extra=()):
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        (d / "key.json").write_text(key if isinstance(key, str) else json.dumps(key))
        (d / "answers.txt").write_text(answers_text)
        r = subprocess.run([sys.executable, str(grade), "--answers", str(d / "answers.txt"), "--key",
                            str(d / "key.json"), "--labs", labs, "--json", str(d / "report.json"), *extra],
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
# Missing: a question with no line, or with nothing after its '=', scores nothing and is listed.
r, rep = run("04.blocks = 5\n")
expect("a missing answer exits 1", r.returncode == 1, r.stdout)
expect("a missing answer is missing", results(rep) == {"02.kv_gb": "missing", "04.blocks": "right"}, rep)
r, rep = run("02.kv_gb =\n04.blocks = \n")
expect("an empty answer is missing, not an error", r.returncode == 1 and results(rep) == {
    "02.kv_gb": "missing", "04.blocks": "missing"}, r.stdout + r.stderr)
# The key stays hidden: a wrong or missing answer shows no expected number, on screen or in the report;
# a right one shows its own; --reveal shows them all.
for text in ("", "02.kv_gb = 2.5\n04.blocks = 4\n"):
    r, rep = run(text)
    expect(f"answers {text!r} reveal no expected number", "2.68" not in r.stdout and "| 5 |" not in r.stdout
           and rep and all("expected" not in q for q in rep["questions"]), r.stdout + json.dumps(rep))
    expect(f"answers {text!r} say how to see the key", "--reveal" in r.stdout, r.stdout)
r, rep = run("04.blocks = 5\n")
expect("a right answer shows its expected number", "| 04.blocks | 04 | 5 | 5 |" in r.stdout
       and {q["id"]: q.get("expected") for q in rep["questions"]} == {"02.kv_gb": None, "04.blocks": 5}, r.stdout)
r, rep = run("", extra=["--reveal"])
expect("--reveal shows every expected number", "| 02.kv_gb | 02 |  | 2.68435 |" in r.stdout
       and [q.get("expected") for q in rep["questions"]] == [2.68435456, 5], r.stdout)
r = subprocess.run([sys.executable, str(grade), "--reveal"], capture_output=True, text=True, timeout=60)
expect("--reveal without --answers exits 2 naming it", r.returncode == 2 and "--reveal" in r.stderr, r.stderr)
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
r = subprocess.run([sys.executable, str(grade), "--answers", "/dev/null", "--key", "/nonexistent/key.json"],
                   capture_output=True, text=True, timeout=60)
expect("a key that cannot be read exits 2 naming --key", r.returncode == 2 and "--key /nonexistent/key.json"
       in r.stderr, r.stderr)

# grade.sh --answers in a copy of the tracked tree, with no build folder and nothing on PATH but python3 and
# dirname: it reads the saved key and builds nothing (setup.sh would need cmake and a compiler).
with tempfile.TemporaryDirectory() as d:
    copy, tools_bin = pathlib.Path(d) / "tree", pathlib.Path(d) / "bin"
    tracked = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, text=True,
                             check=True).stdout.split("\0")
    for name in filter(None, tracked):
        if (root / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, copy / name)
    tools_bin.mkdir()
    (tools_bin / "python3").symlink_to(sys.executable)
    (tools_bin / "dirname").symlink_to(shutil.which("dirname"))
    (copy / "a.txt").write_text("04.blocks_for_5_2_7 = 5\n04.first_refused_of_5_2_7 =\n")
    r = subprocess.run([shutil.which("bash"), str(copy / "scripts" / "grade.sh"), "--answers", str(copy / "a.txt"), "--labs", "04"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": str(tools_bin)})
    expect("grade.sh --answers runs in a copied tree without building", r.returncode == 1 and
           "| 04.blocks_for_5_2_7 | 04 | 5 | 5 | exact | right |" in r.stdout and "missing" in r.stdout
           and not (copy / "build").exists(), r.stdout + r.stderr)

# The real key, from the engine: the saved key is what the engine computes now.
key = json.loads(subprocess.run([answer_key], capture_output=True, text=True, timeout=120, check=True).stdout)
saved = root / "tests" / "labs" / "answers_key.json"


def same_key(a, b):
    """Equal ids, texts and tolerances, and answers equal but for the last bits (FMA contraction differs by CPU)."""
    fields = ("id", "lab", "text", "rel_tolerance")
    return len(a) == len(b) and all(
        all(x[f] == y[f] for f in fields) and abs(x["answer"] - y["answer"]) <= 1e-12 * abs(y["answer"])
        for x, y in zip(a, b))


expect(f"{saved.relative_to(root)} is what the engine computes now (rewrite it with "
       f"`build/labs/answer_key > {saved.relative_to(root)}`)",
       same_key(json.loads(saved.read_text())["questions"], key["questions"]))
answer = {q["id"]: q["answer"] for q in key["questions"]}
expect("ids are unique", len(answer) == len(key["questions"]))
labs = {int(p.name[:2]) for p in (root / "labs").glob("[0-9][0-9]_*")}
expect("every lab asks a question", {q["lab"] for q in key["questions"]} == labs, sorted(labs))
for lab in sorted(labs):
    asked = [q for q in key["questions"] if q["lab"] == lab]
    expect(f"lab {lab:02d} asks at least five questions", len(asked) >= 5, [q["id"] for q in asked])
expect("every question has its text", all(q["text"].strip() for q in key["questions"]))
# Each chapter's "Questions you can check" lists exactly its questions, in order, as `answer_key --lab NN`
# prints them (the course site is built from the chapters).
for lab in sorted(labs):
    chapter = next((root / "labs").glob(f"{lab:02d}_*")) / "README.md"
    text = chapter.read_text()
    section = text.split("## Questions you can check", 1)[1].split("\n## ", 1)[0] if "## Questions you can check" \
        in text else ""
    listed = [line for line in section.splitlines() if re.match(r"\d+\. `", line)]
    printed = subprocess.run([answer_key, "--lab", f"{lab:02d}"], capture_output=True, text=True, timeout=60,
                             check=True).stdout.splitlines()
    expect(f"{chapter.relative_to(root)} lists `answer_key --lab {lab:02d}` under 'Questions you can check'",
           listed == printed and printed == [f"{i}. `{q['id']}`: {q['text']}" for i, q in
                                             enumerate((q for q in key["questions"] if q["lab"] == lab), 1)],
           f"listed {listed} printed {printed}")
by_hand = {
    "01.rows_without_cache": 400 * 29 + 400 * 399 / 2,   # sum over k of (P + k - 1)
    "01.rows_saved_by_cache": 400 * 29 + 400 * 399 / 2 - (29 + 399),
    "01.steps_with_cache": 400,                          # the prefill step samples token 1, then one a step
    "01.attention_flops_last_over_first": (428 * 429 / 2) / (29 * 30 / 2),
    "01.tpot_ms": (2.2 - 0.2) / 100 * 1e3,
    "02.kv_llama70b_8k_gb": 2 * 80 * 8 * 128 * 8192 * 2 / 1e9,
    "02.kv_llama70b_mha_factor": 64 / 8,
    "02.kv_llama70b_mqa_factor": 8 / 1,
    "02.kv_llama8b_token_kib": 2 * 32 * 8 * 128 * 2 / 1024,
    "02.llama8b_tokens_in_40gb": 40e9 // (2 * 32 * 8 * 128 * 2),
    "02.kv_projection_factor_at_428": 428,
    "03.intensity_gemm_256": 2 * 256 * 4096 * 4096 / (2 * (4096 * 4096 + 2 * 256 * 4096)),
    # M·4096 / (4096 + 2M) >= 989e12 / 3350e9, solved for the smallest whole M
    "03.decode_batch_at_h100_ridge": math.ceil(989e12 / 3350e9 * 4096 / (4096 - 2 * 989e12 / 3350e9)),
    # Llama-3-8B's 8,030,261,248 parameters in bf16 but the embedding (one row read) and the f32 norms
    "03.llama8b_h200_decode_tokens_per_s":
        4800e9 / (2 * (8030261248 - 128256 * 4096 - (32 * 2 * 4096 + 4096)) + 4 * (32 * 2 * 4096 + 4096)),
    "03.batch1_bound_on_h100": 1,                        # intensity 4096 / 4098 ~ 1, far below the ridge ~ 295
    "03.batch32_attainable_tflops": 32 * 4096 / (4096 + 64) * 3350e9 / 1e12,  # below the ridge: I x bandwidth
    "04.blocks_for_5_2_7": 2 + 1 + 2,
    "04.first_refused_of_5_2_7": 3,                      # 2 + 1 blocks taken, 1 left, 7 tokens need 2
    "04.largest_run_after_b": 1000,                      # B's old place; the tail after C holds 100
    "04.blocks_for_d_16": math.ceil(1050 / 16),
    "04.static_c_starts_at_step": 7,                     # B samples tokens 1..6 in steps 1..6; then the batch is done
    "04.continuous_c_starts_at_step": 3,                 # A finishes in step 2, C takes its place in step 3
    "05.standard_over_flash_bytes":                      # v1: Q, O, K, V and S/P 4 times; v3: K, V once per tile
        (2 * 4096 * 64 + 2 * 4096 * 64 + 4 * 4096 * 4096) / (2 * 4096 * 64 + sum(2 * 256 * t * 64
                                                                                for t in range(1, 17))),
    "05.flash_over_standard_flops": 1,
    "05.paper_standard_over_flash": (4096 * 64 + 4096 ** 2) / (4096 ** 2 * 64 ** 2 / 25000),
    "05.fewer_bytes_d128_m16k": 1,                       # N d + N^2 = 4224 N < N^2 d^2 / M = 16384 N
    # v3: Q, O and each of 32 heads reads K, V; v4: each of 8 KV heads once, (m, l, O) per piece, Q re-read
    "05.decode_flash_over_split_k_bytes":
        (2 * 32 * 128 + 32 * 2 * 4096 * 128) / (2 * 32 * 128 + 8 * 2 * 4096 * 128 + 2 * 8 * 32 * 130 + 7 * 32 * 128),
    "06.prefill_steps_alone": 6,                         # ceil(3000 / 512)
    "06.prefill_steps_beside_16": 7,                     # ceil(3000 / (512 - 16))
    "06.chunks_1000_at_256": 4,                          # 256 + 256 + 256 + 232
    "06.last_chunk_1000_at_256": 1000 - 3 * 256,
    "06.prefill_steps_threshold_128": math.ceil(3000 / 128),
    "07.kv_llama8b_2048_mb": 2 * 32 * 8 * 128 * 2048 * 2 / 1e6,
    "07.kv_llama8b_2048_ib_hdr_ms": 2 * 32 * 8 * 128 * 2048 * 2 / 25e9 * 1e3,
    "07.hdr_requests_per_s": 25e9 / (2 * 32 * 8 * 128 * 2048 * 2),
    "07.descriptors_before_merging": 2 * 32 * 4,         # (layer, K or V, block)
    "07.descriptors_after_merging": 2 * 32 * 2,          # runs [4..6 -> 0..2] and [9 -> 3]
}
expect("every question is worked by hand here", set(by_hand) == set(answer), sorted(set(answer) ^ set(by_hand)))
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
