# SPDX-License-Identifier: MIT
"""Checks a learner's answers to the chapters' questions against the answer key (grade.py --answers).

The key comes from the engine: `answer_key` (labs/answer_key.cpp) prints
every checkable question with the answer its engine function computes, as
{"questions": [{"id", "lab", "text", "answer", "rel_tolerance"}]}, and that
output is saved in the tree as tests/labs/answers_key.json (the tools tests
check that it equals what the engine computes now), so checking answers
needs no build.

The answer file has one answer a line, `id = number`; blank lines and lines
starting with `#` are skipped:

    # lab 02
    02.kv_llama70b_8k_gb = 2.68
    04.blocks_for_5_2_7 = 5

A number is written as Python reads a float (1234, 2.68, 2.7e9; no
thousands separators), in the unit the question asks for. An answer is right
when |given - answer| <= rel_tolerance * |answer| (counts have tolerance 0:
exactly). A question with no line, or with nothing after its `=`, is
"missing". A malformed line, an unknown or repeated id, or a value that is
not a finite number is an error naming the file and line. The expected
number of a wrong or missing answer is not shown unless asked for, so an
empty answer file does not reveal the key.
"""
import json
import math
import pathlib
import re

LINE = re.compile(r"^\s*([^=\s]+)\s*=\s*(.*?)\s*$")
# The key saved in the tree: `build/labs/answer_key > tests/labs/answers_key.json` writes it.
SAVED_KEY = pathlib.Path(__file__).resolve().parent.parent / "tests" / "labs" / "answers_key.json"


class AnswersError(Exception):
    """Bad input: the message names the file (and line) and what was expected."""


def load_key(key_file=None):
    """The key's questions, from @p key_file (a saved answer_key output) or, by default, the tree's SAVED_KEY."""
    path = pathlib.Path(key_file) if key_file else SAVED_KEY
    source = f"--key {key_file}" if key_file else str(path)
    try:
        text = path.read_text()
    except OSError as e:
        hint = "" if key_file else "; give --key FILE, the output of `build/labs/answer_key` in the reference tree"
        raise AnswersError(f"{source}: cannot read ({e.strerror}){hint}")
    try:
        questions = json.loads(text)["questions"]
        for q in questions:
            if not (isinstance(q["id"], str) and isinstance(q["lab"], int) and isinstance(q["answer"], (int, float))
                    and isinstance(q["rel_tolerance"], (int, float)) and q["rel_tolerance"] >= 0):
                raise ValueError(q)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise AnswersError(f"{source}: expected {{\"questions\": [{{\"id\": str, \"lab\": int, \"answer\": number, "
                           f"\"rel_tolerance\": number >= 0}}]}} ({type(e).__name__}: {e})")
    return questions


def read_answers(path, known_ids):
    """{id: float} from the answer file at @p path; raises AnswersError naming the line of a bad one."""
    try:
        lines = pathlib.Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise AnswersError(f"--answers {path}: cannot read ({getattr(e, 'strerror', None) or e})")
    answers, seen_at = {}, {}
    for number, line in enumerate(lines, start=1):
        where = f"{path}:{number}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            raise AnswersError(f"{where}: expected 'id = number', got {line.strip()[:80]!r}")
        qid, value = m.group(1), m.group(2)
        if qid not in known_ids:
            raise AnswersError(f"{where}: unknown question id {qid!r} (ids look like {sorted(known_ids)[0]!r})")
        if qid in seen_at:
            raise AnswersError(f"{where}: {qid} is answered again (first at line {seen_at[qid]})")
        seen_at[qid] = number
        if not value:  # `id =` with nothing after it: left for later, so missing
            continue
        try:
            given = float(value)
        except ValueError:
            given = math.nan
        if not math.isfinite(given) or "_" in value:
            raise AnswersError(f"{where}: {qid}: expected a finite number such as 2.68 or 2.7e9, got {value[:40]!r}")
        answers[qid] = given
    return answers


def check(questions, answers, reveal=False):
    """One row per question: its id, lab, the given number and 'right' | 'wrong' | 'missing', and the
    expected number only where the answer is right or @p reveal is set."""
    rows = []
    for q in questions:
        given = answers.get(q["id"])
        if given is None:
            result = "missing"
        else:
            result = "right" if abs(given - q["answer"]) <= q["rel_tolerance"] * abs(q["answer"]) else "wrong"
        row = {"id": q["id"], "lab": q["lab"], "given": given, "rel_tolerance": q["rel_tolerance"], "result": result}
        if result == "right" or reveal:
            row["expected"] = q["answer"]
        rows.append(row)
    return rows
