#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where `servelab serve`'s time goes under an outside client: the whole server
# process is sampled by perf (every thread: the engine loop, the thread pool's
# workers, the HTTP handlers, the kernel on their behalf) while aiperf streams
# chat completions at 1, 4 and 16 concurrent streams, and the samples are
# grouped by what the code does: GEMV/GEMM kernels, attention, the small ops,
# the thread pool's spinning, scheduling and the KV manager, sampling,
# detokenization, HTTP and JSON, the kernel (syscalls, wake-ups, page faults).
#
# Beside the breakdown it prints the engine's own step split from --trace:
# time in schedule / forward / sample / update per step, and the time between
# steps (the loop waiting for requests, admitting them, delivering tokens).
#
# Uses the model, the tokenizer folder and the aiperf venv that
# tools/serving_side_by_side.sh sets up (run that once first).
#
# Usage: tools/serve_breakdown.sh [TYPE]   (f32, bf16, q8_0 or q4_1; default f32)
# Environment: STREAMS (default "1 4 16"), THREADS (2), ISL (128), OSL (128),
#   WORK (default build/llamacpp), SERVELAB_BUILD (default build), SERVE_FLAGS (more flags for serve).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "serve_breakdown.sh: $*" >&2; }
source "$root/tools/aiperf_chat.sh"  # smollm2_dtype, wait_ready, aiperf_chat
type="${1:-f32}"
servelab="${SERVELAB_BUILD:-$root/build}/apps/servelab"
work="${WORK:-$root/build/llamacpp}"
streams="${STREAMS:-1 4 16}" threads="${THREADS:-2}" isl="${ISL:-128}" osl="${OSL:-128}"
case "$type" in
  f32 | bf16 | q8_0) model="$work/SmolLM2-135M-Instruct.${type^^}.gguf" ;;  # written by serving_side_by_side.sh
  q4_1) model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
  *) say "error: TYPE '$type' is not one of f32 bf16 q8_0 q4_1"; exit 1 ;;
esac
for n in "$threads" "$isl" "$osl" $streams; do
  [[ "$n" =~ ^[1-9][0-9]{0,4}$ ]] || { say "error: THREADS, ISL, OSL and STREAMS take positive integers, got '$n'"; exit 1; }
done
aiperf="$work/aiperf-venv/bin/aiperf" tokenizer="$work/smollm2-tokenizer"
for f in "$servelab" "$model" "$aiperf" "$tokenizer/tokenizer.json"; do
  [ -e "$f" ] || { say "error: $f not found (build servelab, then run tools/serving_side_by_side.sh once)"; exit 1; }
done
command -v perf >/dev/null || { say "error: perf not found (apt-get install linux-perf)"; exit 1; }

out="$work/breakdown-$type"
rm -rf "$out" && mkdir -p "$out"
port=18531
for c in $streams; do
  port=$((port + 1))
  # shellcheck disable=SC2086  # SERVE_FLAGS is a list of flags
  "$servelab" serve --model "$model" --dtype "$(smollm2_dtype "$type")" --threads "$threads" --port "$port" --served-model-name smollm2 \
    --max-num-seqs 16 --trace "$out/trace-$c.json" ${SERVE_FLAGS:-} >"$out/server-$c.log" 2>&1 &
  pid=$!
  wait_ready serve "$port" "$pid" "$out/server-$c.log"
  say "$type, $c streams"
  perf record -q -F 499 -p "$pid" -o "$out/perf-$c.data" 2>"$out/perf-$c.log" &
  perf_pid=$!
  aiperf_chat "$port" "$c" $((100 + c)) "$out/aiperf-$c" || { kill "$pid" "$perf_pid"; exit 1; }
  kill -INT "$perf_pid"
  wait "$perf_pid" || true
  kill "$pid"
  wait "$pid" || true
  perf report -i "$out/perf-$c.data" --no-children --sort dso,sym -q -g none --percent-limit 0 2>/dev/null >"$out/symbols-$c.txt"
done

python3 - "$out" "$streams" "$type" "$threads" <<'PY'
import json, pathlib, re, statistics, sys
out, streams, type_, threads = pathlib.Path(sys.argv[1]), [int(c) for c in sys.argv[2].split()], sys.argv[3], sys.argv[4]
# First match wins: the pattern is searched in perf's line (library, then symbol). Without call
# graphs a BLAS call is counted where its symbol is, so a prefill's attention sgemms (lab 05's
# query tiles call OpenBLAS) count as GEMM; a decode's tiles run on tile_scores/tile_values
# (kernels/cpu/attention_tile.h), attention. oneDNN's prefill GEMMs run as JIT code.
groups = [
    ("GEMV/GEMM kernels (oneDNN's JIT, OpenBLAS)", r"\[JIT\]|rows_|tiling::|Int8Blocks|matmul|quantize_inputs|sgemm|sgemv|dgemm|dnnl|jit|gemm|kernel_[0-9]|dequantize|bf16_to|widen"),
    ("attention (its own loops)", r"attention|softmax|flash|split_k|online|tile_scores|tile_values"),
    ("norms, RoPE, SiLU, residual, embedding", r"rmsnorm|rope|silu|add_inplace|add_bias|embedding|memcpy|memmove"),
    ("thread pool (claiming, spinning, waking)", r"ThreadPool|run_claimed|worker_loop|parallel_for"),
    ("scheduler and KV manager", r"Scheduler|KVCacheManager|BlockPool|BlockTable|Engine::|schedule|allocate_slots|hash"),
    ("sampling", r"Sampler|sample|argmax|top_p|top_k"),
    ("tokenizer and detokenization", r"Tokenizer|TextStream|utf8|Bpe|bpe|decode_piece|pre_token|regex|chat_template|Template|minja|jinja"),
    ("HTTP and JSON", r"brotli|httplib|nlohmann|json|sse|Sse|openai|OpenAI|Http|http|std::__cxx11::basic_string|snprintf|to_chars|format"),
    ("kernel: futex, scheduling, wake-ups", r"\[k\].*(futex|schedule|switch|wake|try_to_wake|pick_next|finish_task|enqueue|dequeue|update_curr|__x86_indirect|hrtimer|tick)"),
    ("kernel: network and syscalls", r"\[k\]"),
    ("exp in libm (sampling's weights, the softmax, SiLU)", r"libm\.so|__exp|expf|exp@"),
    ("libc, allocator", r"malloc|free|operator new|operator delete|_int_|cfree|memset|strlen"),
]
rows = {}
for c in streams:
    pct = {g: 0.0 for g, _ in groups}
    pct["other"] = 0.0
    for line in (out / f"symbols-{c}.txt").read_text().splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+(.*)", line)
        if not m:
            continue
        p, sym = float(m.group(1)), m.group(2)
        for g, rx in groups:
            if re.search(rx, sym):
                pct[g] += p
                break
        else:
            pct["other"] += p
    metrics = json.loads((out / f"aiperf-{c}" / "profile_export_aiperf.json").read_text())
    # The engine's step split, from its Chrome trace: slices on the "engine steps" track.
    events = json.loads((out / f"trace-{c}.json").read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    phase = {"schedule": 0.0, "forward": 0.0, "sample": 0.0, "update": 0.0}
    steps = []
    for e in events:
        if e.get("ph") != "X" or names.get((e["pid"], e["tid"])) != "engine steps":
            continue
        if e["name"] == "step":
            steps.append((e["ts"], e["dur"]))
        elif e["name"] in phase:
            phase[e["name"]] += e["dur"]
    steps.sort()
    busy = sum(d for _, d in steps)
    span = steps[-1][0] + steps[-1][1] - steps[0][0] if steps else 0
    rows[c] = (pct, metrics, phase, busy, span, len(steps))

print(f"\n## Where servelab serve's time goes: SmolLM2-135M-Instruct {type_}, {threads} threads, aiperf\n")
print("Share of the server process's perf samples (all its threads, user and kernel), by what the code does.\n")
print("| | " + " | ".join(f"{c} stream{'s' if c > 1 else ''}" for c in streams) + " |")
print("|---|" + "---:|" * len(streams))
for g in [g for g, _ in groups] + ["other"]:
    print(f"| {g} | " + " | ".join(f"{rows[c][0][g]:.1f}%" for c in streams) + " |")
print("| output tok/s (aiperf) | " + " | ".join(f"{rows[c][1]['output_token_throughput']['avg']:.1f}" for c in streams) + " |")
print("| ITL p50 [ms] | " + " | ".join(f"{rows[c][1]['inter_token_latency']['p50']:.1f}" for c in streams) + " |")
print("\nThe engine loop's own split (--trace), per step, mean [ms]; 'between steps' is the loop's wall time outside")
print("step(): waiting for requests, admitting them, handing tokens to the HTTP threads.\n")
print("| | " + " | ".join(f"{c} stream{'s' if c > 1 else ''}" for c in streams) + " |")
print("|---|" + "---:|" * len(streams))
print("| steps | " + " | ".join(str(rows[c][5]) for c in streams) + " |")
for p in ("schedule", "forward", "sample", "update"):
    print(f"| {p} | " + " | ".join(f"{rows[c][2][p] / 1000 / max(rows[c][5], 1):.3f}" for c in streams) + " |")
print("| whole step | " + " | ".join(f"{rows[c][3] / 1000 / max(rows[c][5], 1):.3f}" for c in streams) + " |")
print("| between steps | " + " | ".join(f"{(rows[c][4] - rows[c][3]) / 1000 / max(rows[c][5] - 1, 1):.3f}" for c in streams) + " |")
PY
