#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Prefill and decode speed of servelab beside llama.cpp on this CPU, same
# model shape (qwen2.5-0.5b, random weights), f32 and bf16 weights, 1 and 2
# threads, measured in alternating rounds so both see the same machine.
#
# llama.cpp comes as source from PyPI (tools/llamacpp_build.sh); its
# llama-bench is built CPU-only with -march=native, and tools/make_gguf.py writes GGUFs of the
# same shape as servelab's synthetic preset. servelab's figures come from
# bench_cpu_speed (build it first: cmake --build build --target bench_cpu_speed).
#
# Prints one Markdown table: per weights and threads, the median tok/s of
# each side over the rounds, the min-max spread, and the ratio.
#
# Usage: tools/llamacpp_side_by_side.sh [rounds]   (default 3)
# Environment: SERVELAB_ISA=avx2 (both sides without AVX-512: an AVX2-only CPU rehearsed; see llamacpp_build.sh),
#              WORK (default build/llamacpp: downloads, llama.cpp build, GGUFs, ~3 GB),
#              LLAMA_CPP_PYTHON_VERSION (default 0.3.36), SERVELAB_BUILD (default build).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/tools/llamacpp_build.sh"  # rounds, work, version; llamacpp_build
bench="${SERVELAB_BUILD:-$root/build}/bench/bench_cpu_speed"
say() { echo "llamacpp_side_by_side.sh: $*" >&2; }
[ -x "$bench" ] || { say "error: $bench not found (cmake --build build --target bench_cpu_speed)"; exit 1; }

# 1. llama.cpp's source and its llama-bench.
llamacpp_build llama-bench
llama_bench="$llama_bin/llama-bench"

# 2. GGUFs of the preset's shape.
for dtype in f32 bf16; do
  [ -f "$work/qwen2.5-0.5b-$dtype.gguf" ] ||
    "$work/venv/bin/python" "$root/tools/make_gguf.py" --dtype "$dtype" \
      --out "$work/qwen2.5-0.5b-$dtype.gguf"
done

# 3. Alternating rounds: llama-bench (pp512 from an empty context; tg64 after 96 tokens, so its 64 steps
#    see 96..159 keys, 128 on average: the context of servelab's decode step; 2 repetitions each), then
#    servelab's benchmark.
out="$work/rounds"
rm -rf "$out" && mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for dtype in f32 bf16; do
    say "round $r/$rounds: llama.cpp $dtype"
    "$llama_bench" -m "$work/qwen2.5-0.5b-$dtype.gguf" -p 512 -n 0 -t 1,2 -r 2 -o json \
      >"$out/llamacpp-$dtype-$r-pp.json" 2>/dev/null
    "$llama_bench" -m "$work/qwen2.5-0.5b-$dtype.gguf" -p 0 -n 64 -d 96 -t 1,2 -r 2 -o json \
      >"$out/llamacpp-$dtype-$r-tg.json" 2>/dev/null
  done
  say "round $r/$rounds: servelab"
  "$bench" --benchmark_filter='BM_(Prefill|Decode)/weights:[012]/threads:[12]/deterministic:0' \
    --benchmark_out="$out/servelab-$r.json" --benchmark_out_format=json >/dev/null 2>&1
done

# 4. The table.
python3 - "$out" "$rounds" "$version" "$src" "${SERVELAB_ISA:-native}" <<'EOF'
import json, statistics, sys, pathlib, subprocess
out, rounds, version, src, isa = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
llama, ours = {}, {}   # (weights, threads, test) -> [tok/s per round]
for r in range(1, rounds + 1):
    for dtype in ("f32", "bf16"):
        for part in ("pp", "tg"):
            for row in json.loads((out / f"llamacpp-{dtype}-{r}-{part}.json").read_text()):
                test = "prefill 512" if row["n_prompt"] else "decode"
                llama.setdefault((dtype, row["n_threads"], test), []).append(row["avg_ts"])
    for b in json.loads((out / f"servelab-{r}.json").read_text())["benchmarks"]:
        name = b["name"]  # BM_Prefill/weights:0/threads:1/deterministic:0/real_time
        parts = dict(p.split(":") for p in name.split("/")[1:4])
        w = {"0": "f32", "1": "bf16", "2": "bf16 math"}[parts["weights"]]
        test = "prefill 512" if name.startswith("BM_Prefill") else "decode"
        ours.setdefault((w, int(parts["threads"]), test), []).append(b["tok/s"])
commit = subprocess.run(["git", "-C", src, "log", "-1", "--format=%h"], capture_output=True, text=True).stdout.strip()
print(f"\n## servelab beside llama.cpp (llama-cpp-python {version}'s llama.cpp {commit or '?'}), qwen2.5-0.5b shape, "
      f"random weights, instruction set: {isa} on both sides\n")
print(f"Median tok/s over {rounds} alternating rounds (llama-bench: mean of 2 repetitions per round), [min-max].")
print("Decode at the same context on both sides: llama.cpp's tg64 after 96 tokens (keys 96..159, 128 on average), "
      "servelab's one step at context 128 with its serving attention (flash, split-K decode).\n")
print("| test | weights | threads | llama.cpp tok/s | servelab tok/s | servelab / llama.cpp |")
print("|---|---|---:|---:|---:|---:|")
fmt = lambda v: f"{statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]"
for test in ("prefill 512", "decode"):
    for w in ("f32", "bf16", "bf16 math"):
        for t in (1, 2):
            mine = ours.get((w, t, test))
            theirs = llama.get(("f32" if w == "f32" else "bf16", t, test))
            if not mine or not theirs:
                continue
            print(f"| {test} | {w} | {t} | {fmt(theirs)} | {fmt(mine)} | "
                  f"{statistics.median(mine) / statistics.median(theirs):.2f} |")
EOF
