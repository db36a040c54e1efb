#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Serving speed of `servelab serve` beside llama.cpp's llama-server on the same
# GGUF file, the same cores and the same outside client: NVIDIA's aiperf (from
# PyPI, in its own venv) sends streaming chat completions of ISL prompt tokens
# and exactly OSL output tokens (ignore_eos) at 1, 4 and 16 concurrent streams.
#
# Points alternate between the two servers (one server runs at a time), and
# every point has prompts of its own (aiperf --random-seed differs per point),
# so no cache is warm from an earlier point. Three modes:
#   off     caches off on both sides: servelab --no-enable-prefix-caching,
#           llama-server's requests carry cache_prompt:false;
#   on      both servers' defaults (servelab's prefix cache, llama-server's
#           prompt cache), fresh prompts: only the chat template's head repeats;
#   shared  defaults, and every prompt starts with the same SHARED-token system
#           prompt (aiperf --shared-system-prompt-length): what a prefix cache buys.
#
# The model is SmolLM2-135M-Instruct (scripts/get-model.sh): the Q4_1 it ships
# and the Q8_0, bf16 and f32 files llama-quantize writes from it. servelab
# reads f32 and bf16 with --dtype gguf and multiplies Q8_0/Q4_1 in int8 as
# llama.cpp does (--dtype gguf-math). aiperf counts tokens with the GGUF's own
# vocabulary (tools/gguf_tokenizer_json.py: no Hub access needed).
#
# Each point records `uptime` before it, and each server's peak resident memory.
# Prints one Markdown table per mode: output tok/s, TTFT p50 and ITL p50 of both
# servers (median over rounds), the ratio of the medians and each round's ratio, the load average.
#
# Usage: tools/serving_side_by_side.sh [rounds]   (default 1)
# Environment: TYPES (default "f32 bf16"; also q8_0 q4_1), STREAMS (default "1 4 16"),
#   MODES (default "off on shared"), THREADS (default 2), ISL (128), OSL (128), SHARED (256),
#   WORK (default build/llamacpp), SERVELAB_BUILD (default build), LLAMA_CPP_PYTHON_VERSION.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
set -- "${1:-1}"
source "$root/tools/llamacpp_build.sh"  # rounds, work, version; llamacpp_build, smollm2_files
source "$root/tools/aiperf_chat.sh"     # smollm2_dtype, wait_ready, aiperf_chat
say() { echo "serving_side_by_side.sh: $*" >&2; }
servelab="${SERVELAB_BUILD:-$root/build}/apps/servelab"
types="${TYPES:-f32 bf16}" streams="${STREAMS:-1 4 16}" modes="${MODES:-off on shared}"
threads="${THREADS:-2}" isl="${ISL:-128}" osl="${OSL:-128}" shared="${SHARED:-256}"
for n in "$threads" "$isl" "$osl" "$shared" $streams; do
  [[ "$n" =~ ^[1-9][0-9]{0,4}$ ]] || { say "error: THREADS, ISL, OSL, SHARED and STREAMS take positive integers, got '$n'"; exit 1; }
done
for t in $types; do
  case "$t" in f32 | bf16 | q8_0 | q4_1) ;; *) say "error: TYPES: '$t' is not one of f32 bf16 q8_0 q4_1"; exit 1 ;; esac
done
for m in $modes; do
  case "$m" in off | on | shared) ;; *) say "error: MODES: '$m' is not one of off on shared"; exit 1 ;; esac
done
[ -x "$servelab" ] || { say "error: $servelab not found (cmake --build build)"; exit 1; }

llamacpp_build llama-server llama-quantize
smollm2_files
aiperf_venv="$work/aiperf-venv" aiperf="$work/aiperf-venv/bin/aiperf"
[ -x "$aiperf" ] || { python3 -m venv "$aiperf_venv" && "$aiperf_venv/bin/pip" install -q aiperf gguf; }
tokenizer="$work/smollm2-tokenizer"
[ -f "$tokenizer/tokenizer.json" ] ||
  "$aiperf_venv/bin/python" "$root/tools/gguf_tokenizer_json.py" "${smollm2[q4_1]}" "$tokenizer" >&2

out="$work/serving-rounds"
rm -rf "$out" && mkdir -p "$out"
port=18431
max_streams=$(printf '%s\n' $streams | sort -n | tail -1)
# Both servers' KV caches are sized for the same requests: llama-server gets one slot per stream of
# slot_len tokens, servelab a max-model-len of slot_len (its default budget is then max_streams
# prompts of that length and one more, not its default sized for the model's full context).
slot_len=$((isl + osl + shared + 128))
pid=""
stop_server() { [ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=""; }; }
trap stop_server EXIT

# start_server SIDE TYPE MODE LOG: one server on a port of its own (the last one's may sit in
# TIME_WAIT), ready when /v1/models answers.
start_server() {
  local side="$1" t="$2" mode="$3" log="$4"
  port=$((port + 1))
  if [ "$side" = servelab ]; then
    local cache=()
    [ "$mode" = off ] && cache=(--no-enable-prefix-caching)
    "$servelab" serve --model "${smollm2[$t]}" --dtype "$(smollm2_dtype "$t")" --threads "$threads" --port "$port" \
      --served-model-name smollm2 --max-num-seqs "$max_streams" --max-model-len "$slot_len" "${cache[@]}" >"$log" 2>&1 &
  else
    # One slot per stream, each long enough for the longest prompt and its output.
    "$llama_bin/llama-server" -m "${smollm2[$t]}" -t "$threads" -tb "$threads" -np "$max_streams" \
      -c $((max_streams * slot_len)) --port "$port" --alias smollm2 --no-webui >"$log" 2>&1 &
  fi
  pid=$!
  wait_ready "$side" "$port" "$pid" "$log"
}

seed=1
for r in $(seq 1 "$rounds"); do
  for mode in $modes; do
    for t in $types; do
      for side in servelab llama; do
        dir="$out/$r/$mode/$t/$side"
        mkdir -p "$dir"
        start_server "$side" "$t" "$mode" "$dir/server.log"
        for c in $streams; do
          seed=$((seed + 1))
          say "round $r/$rounds, $mode, $t, $side, $c streams"
          extra=()
          [ "$side:$mode" = llama:off ] && extra+=(--extra-inputs cache_prompt:false)
          [ "$mode" = shared ] && extra+=(--shared-system-prompt-length "$shared")
          uptime >"$dir/uptime-$c.txt"
          aiperf_chat "$port" "$c" "$seed" "$dir/aiperf-$c" "${extra[@]}"
        done
        grep VmHWM "/proc/$pid/status" | awk '{print $2}' >"$dir/peak-rss-kb.txt"
        stop_server
      done
    done
  done
done

python3 - "$out" "$rounds" "$types" "$streams" "$modes" "$threads" "$isl" "$osl" "$shared" <<'PY'
import json, pathlib, statistics, sys
out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
types, streams, modes = sys.argv[3].split(), [int(c) for c in sys.argv[4].split()], sys.argv[5].split()
threads, isl, osl, shared = sys.argv[6:10]
what = {"off": "caches off (servelab --no-enable-prefix-caching, llama-server cache_prompt:false), fresh prompts",
        "on": "both servers' defaults (prefix cache / prompt cache on), fresh prompts",
        "shared": f"defaults, every prompt after the same {shared}-token system prompt"}
med = statistics.median

def point(r, mode, t, side, c):
    d = out / str(r) / mode / t / side
    m = json.loads((d / f"aiperf-{c}" / "profile_export_aiperf.json").read_text())
    load = float((d / f"uptime-{c}.txt").read_text().rsplit("load average:", 1)[1].split(",")[0])
    return (m["output_token_throughput"]["avg"], m["time_to_first_token"]["p50"],
            m["inter_token_latency"]["p50"], load, m["input_sequence_length"]["avg"])

print(f"\n## servelab serve beside llama-server: SmolLM2-135M-Instruct GGUF, {threads} threads each, aiperf")
print(f"\nStreaming chat, {isl} prompt tokens (aiperf's count), exactly {osl} output tokens; median of {rounds} round(s);"
      " ratios servelab / llama-server (tok/s: higher is better; TTFT and ITL: lower is better).")
for mode in modes:
    print(f"\n### {mode}: {what[mode]}\n")
    # The servers alternate within a round, so each round's ratio compares runs minutes apart; the VM's speed
    # drifts more than that between rounds, and the spread of these ratios says how far the median can be trusted.
    print("| weights | streams | output tok/s servelab / llama-server | ratio | ratio per round | TTFT p50 [ms] |"
          " ITL p50 [ms] | load before |")
    print("|---|---:|---|---:|---|---|---|---|")
    for t in types:
        for c in streams:
            s = [point(r, mode, t, "servelab", c) for r in range(1, rounds + 1)]
            l = [point(r, mode, t, "llama", c) for r in range(1, rounds + 1)]
            f = lambda rows, i: med(x[i] for x in rows)
            per_round = ", ".join(f"{a[0] / b[0]:.2f}" for a, b in zip(s, l))
            print(f"| {t} | {c} | {f(s, 0):.1f} / {f(l, 0):.1f} | {f(s, 0) / f(l, 0):.2f} | {per_round} | "
                  f"{f(s, 1):,.0f} / {f(l, 1):,.0f} | {f(s, 2):.1f} / {f(l, 2):.1f} | "
                  f"{f(s, 3):.2f} / {f(l, 3):.2f} |")
print("\nPeak resident memory [MB], servelab / llama-server (largest over rounds):\n")
print("| weights | " + " | ".join(modes) + " |")
print("|---|" + "---|" * len(modes))
for t in types:
    cells = []
    for mode in modes:
        rss = {side: max(int((out / str(r) / mode / t / side / "peak-rss-kb.txt").read_text()) for r in range(1, rounds + 1))
               for side in ("servelab", "llama")}
        cells.append(f"{rss['servelab'] / 1024:.0f} / {rss['llama'] / 1024:.0f}")
    print(f"| {t} | " + " | ".join(cells) + " |")
PY
