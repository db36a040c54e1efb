#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Decode speed of servelab beside llama.cpp on a real GGUF, the same file on
# both sides: SmolLM2-135M-Instruct (scripts/get-model.sh) as the Q4_1 it
# ships, and as Q8_0, bf16 and f32 files written from it by llama-quantize.
# 1 and 2 threads, in alternating rounds so both see the same machine.
#
# llama.cpp: llama-bench tg64 (64 tokens from an empty context, 2 repetitions
# a round), built from PyPI's source (tools/llamacpp_build.sh). servelab:
# `servelab generate --dtype gguf` (the file's own types: f32 and bf16 rows,
# blocks widened in registers) and `--dtype gguf-math` (blocks multiplied in
# int8 as llama.cpp does), 16 prompt tokens then 64 new ones; tok/s is
# 1000 / TPOT, the mean gap between the later tokens (context 16 to 80).
#
# Prints one Markdown table: per file and threads, the median tok/s of each
# side over the rounds, the min-max spread, and the ratio.
#
# Usage: tools/llamacpp_gguf_decode.sh [rounds]   (default 3)
# Environment: WORK (default build/llamacpp), LLAMA_CPP_PYTHON_VERSION (default 0.3.36),
#              SERVELAB_BUILD (default build).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/tools/llamacpp_build.sh"  # rounds, work, version; llamacpp_build
servelab="${SERVELAB_BUILD:-$root/build}/apps/servelab"
say() { echo "llamacpp_gguf_decode.sh: $*" >&2; }
[ -x "$servelab" ] || { say "error: $servelab not found (cmake --build build)"; exit 1; }
llamacpp_build llama-bench llama-quantize
smollm2_files

out="$work/gguf-rounds"
rm -rf "$out" && mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for t in f32 bf16 q8_0 q4_1; do
    say "round $r/$rounds: $t"
    # -p 0: token generation only (prompt processing is not compared here).
    "$llama_bin/llama-bench" -m "${smollm2[$t]}" -p 0 -n 64 -t 1,2 -r 2 -o json >"$out/llamacpp-$t-$r.json" 2>/dev/null
    for threads in 1 2; do
      for dtype in gguf gguf-math; do
        case "$t:$dtype" in f32:gguf-math | bf16:gguf-math) continue ;; esac
        "$servelab" generate --model "${smollm2[$t]}" --dtype "$dtype" --threads "$threads" --prompt-len 16 \
          --max-new-tokens 64 2>/dev/null | grep -o "TPOT [0-9.]* ms" >"$out/servelab-$t-$dtype-$threads-$r.txt"
      done
    done
  done
done

python3 - "$out" "$rounds" "$version" "$src" <<'PY'
import json, statistics, sys, pathlib, subprocess
out, rounds, version, src = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
llama, ours = {}, {}
for r in range(1, rounds + 1):
    for t in ("f32", "bf16", "q8_0", "q4_1"):
        for row in json.loads((out / f"llamacpp-{t}-{r}.json").read_text()):
            llama.setdefault((t, row["n_threads"]), []).append(row["avg_ts"])
        for threads in (1, 2):
            for dtype in ("gguf", "gguf-math"):
                f = out / f"servelab-{t}-{dtype}-{threads}-{r}.txt"
                if f.exists() and f.read_text().strip():
                    ours.setdefault((t, dtype, threads), []).append(1000.0 / float(f.read_text().split()[1]))
commit = subprocess.run(["git", "-C", src, "log", "-1", "--format=%h"], capture_output=True, text=True).stdout.strip()
print(f"\n## servelab beside llama.cpp (llama-cpp-python {version}'s llama.cpp {commit or '?'}), SmolLM2-135M-Instruct GGUF, decode\n")
print(f"Median tok/s over {rounds} alternating rounds, [min-max]. llama.cpp: llama-bench tg64 (mean of 2 repetitions);")
print("servelab: 1000 / TPOT of `servelab generate`, 16 prompt tokens then 64 new ones.\n")
print("| file | servelab --dtype | threads | llama.cpp tok/s | servelab tok/s | servelab / llama.cpp |")
print("|---|---|---:|---:|---:|---:|")
fmt = lambda v: f"{statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]"
for t in ("f32", "bf16", "q8_0", "q4_1"):
    for dtype in ("gguf", "gguf-math"):
        for threads in (1, 2):
            mine, theirs = ours.get((t, dtype, threads)), llama.get((t, threads))
            if not mine or not theirs:
                continue
            print(f"| {t.upper()} | {dtype} | {threads} | {fmt(theirs)} | {fmt(mine)} | "
                  f"{statistics.median(mine) / statistics.median(theirs):.2f} |")
PY
