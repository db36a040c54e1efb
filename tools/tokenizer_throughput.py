#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Encode throughput of servelab's tokenizer beside Hugging Face tokenizers, on the same text, in one run.

Builds the benchmark text (the fixture training text repeated to --mb MB), runs
build/bench/bench_tokenizer on it, then times `tokenizers.Tokenizer.encode` on
the same text with the same tokenizer.json files, two ways: the whole text as
one string, and one call per line (tokenizers is faster on short inputs). Both
run on one thread (TOKENIZERS_PARALLELISM=false); both keep a word cache, and
both are measured warm (best of the repetitions after a first run).

Before timing, the ids are compared: bench_tokenizer reports an FNV-1a hash of
its ids, and this script hashes tokenizers' ids the same way. A tokenizer whose
ids differ is reported as a mismatch and left out of the comparison.

Usage:
  /tmp/hfenv/bin/python tools/tokenizer_throughput.py [--bench build/bench/bench_tokenizer] [--mb 4]
      [--extra-tokenizer tokenizer.json]   # e.g. a real vocabulary, see tools/convert_tiktoken.py
Without the `tokenizers` package only servelab's column is printed.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "tokenizer")
NAMES = ["qwen2-style", "llama3-style", "gpt2-style"]


def fnv1a32(ids):
    h = 2166136261
    for i in ids:
        for b in range(4):
            h = ((h ^ ((i >> (8 * b)) & 0xFF)) * 16777619) & 0xFFFFFFFF
    return h


def bench_text(mb):
    with open(os.path.join(FIXTURES, "training_text.txt"), "rb") as f:
        unit = f.read()
    out = b""
    while len(out) < mb * 1e6:  # whole copies, as bench_tokenizer does
        out += unit
    return out


def run_servelab(bench, text_path, repetitions, extra):
    env = dict(os.environ, SERVELAB_BENCH_TEXT=text_path)
    if extra:
        env["SERVELAB_BENCH_TOKENIZER"] = extra  # reported by bench_tokenizer as "custom"
    cmd = [bench, "--benchmark_filter=BM_Encode", "--benchmark_format=json",
           f"--benchmark_repetitions={repetitions}", "--benchmark_report_aggregates_only=false"]
    doc = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
    results = {}
    for b in doc["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        kind, name = b["name"].split("/")[:2]
        entry = results.setdefault(name, {"whole": 0.0, "lines": 0.0})
        key = "lines" if kind == "BM_EncodeLines" else "whole"
        entry[key] = max(entry[key], b["bytes_per_second"] / 1e6)
        if key == "whole":
            entry.update(hash=int(b["ids_hash"]), tokens=int(b["tokens"]))
    return results, doc["context"]


def best_mb_s(encode, nbytes, repetitions):
    encode()  # warm the word cache, as the C++ benchmark's first iterations do
    best = 0.0
    for _ in range(repetitions):
        start = time.perf_counter()
        encode()
        best = max(best, nbytes / (time.perf_counter() - start) / 1e6)
    return best


def run_hf(path, text, repetitions):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    ids = tok.encode(text, add_special_tokens=False).ids
    lines = text.splitlines(keepends=True)
    nbytes = len(text.encode())

    def per_line():
        for line in lines:
            tok.encode(line, add_special_tokens=False)

    return {"whole": best_mb_s(lambda: tok.encode(text, add_special_tokens=False), nbytes, repetitions),
            "lines": best_mb_s(per_line, nbytes, repetitions), "hash": fnv1a32(ids), "tokens": len(ids)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default=os.path.join(REPO, "build", "bench", "bench_tokenizer"))
    ap.add_argument("--mb", type=float, default=4.0, help="size of the text in MB")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--extra-tokenizer", help="another tokenizer.json to measure (row 'custom')")
    args = ap.parse_args()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    data = bench_text(args.mb)
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as f:
        f.write(data)
        text_path = f.name
    try:
        ours, context = run_servelab(args.bench, text_path, args.repetitions, args.extra_tokenizer)
    finally:
        os.unlink(text_path)
    try:
        import tokenizers
        hf_version = tokenizers.__version__
    except ImportError:
        hf_version = None
    text = data.decode("utf-8")

    print("## tokenizer encode throughput\n")
    print(f"text       {len(data) / 1e6:.1f} MB: tests/fixtures/tokenizer/training_text.txt repeated "
          f"(Korean and English), warm cache, best of {args.repetitions}")
    print(f"machine    {context.get('num_cpus')} CPUs at {context.get('mhz_per_cpu')} MHz, 1 thread each")
    print(f"reference  Hugging Face tokenizers {hf_version or 'not installed'}\n")
    print("| tokenizer | tokens | same ids | servelab, whole text | tokenizers, whole text "
          "| servelab, per line | tokenizers, per line | servelab / tokenizers (per line) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    paths = {name: os.path.join(FIXTURES, name, "tokenizer.json") for name in NAMES}
    if args.extra_tokenizer:
        paths["custom"] = args.extra_tokenizer
    for name, path in paths.items():
        mine = ours[name]
        if hf_version is None:
            print(f"| {name} | {mine['tokens']} | - | {mine['whole']:.1f} | - | {mine['lines']:.1f} | - | - |")
            continue
        hf = run_hf(path, text, args.repetitions)
        same = mine["hash"] == hf["hash"] and mine["tokens"] == hf["tokens"]
        ratio = f"{mine['lines'] / hf['lines']:.1f}x" if same else "(ids differ: not compared)"
        print(f"| {name} | {mine['tokens']} | {'yes' if same else 'NO'} | {mine['whole']:.1f} | {hf['whole']:.1f} "
              f"| {mine['lines']:.1f} | {hf['lines']:.1f} | {ratio} |")
    print("\nMB/s of UTF-8 input, higher is better.")

if __name__ == "__main__":
    sys.exit(main())
