#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sourced by tools/serving_side_by_side.sh and tools/serve_breakdown.sh: what
# both do to a server, written once. The caller sets say, aiperf (its binary),
# tokenizer (a tokenizer folder), isl and osl.

# servelab's --dtype for a SmolLM2 GGUF: each type in the arithmetic llama.cpp uses for it (f32; bf16 dot products
# for BF16, inputs rounded to bf16; int8 for Q8_0/Q4_1).
smollm2_dtype() { case "$1" in f32) echo gguf ;; *) echo gguf-math ;; esac; }

# wait_ready NAME PORT PID LOG: returns once /v1/models answers; exits with the log's tail if the
# server dies first or stays silent for 120 s.
wait_ready() {
  local name="$1" port="$2" pid="$3" log="$4"
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { say "error: $name did not start; its log:"; tail -5 "$log" >&2; exit 1; }
    sleep 0.2
  done
  say "error: $name did not answer on port $port within 120 s"
  exit 1
}

# aiperf_chat PORT STREAMS SEED DIR [aiperf flags...]: one point of streaming chat completions of
# $isl prompt and exactly $osl output tokens, results under DIR (its log beside it, DIR.log).
# --request-rate keeps aiperf's credit loop on a timer (its pure concurrency mode spins a core);
# --no-server-metrics: llama-server has no /metrics by default, and scraping ours costs our server 2%.
aiperf_chat() {
  local port="$1" c="$2" seed="$3" dir="$4"
  shift 4
  "$aiperf" profile --model smollm2 --url "http://127.0.0.1:$port" --endpoint-type chat --streaming \
    --tokenizer "$tokenizer" --use-server-token-count --no-server-metrics --isl "$isl" --isl-stddev 0 --osl "$osl" \
    --extra-inputs ignore_eos:true "$@" --concurrency "$c" --request-rate 20 --request-count $((c < 3 ? 6 : 2 * c)) \
    --warmup-request-count 1 --random-seed "$seed" --ui none --artifact-dir "$dir" >"$dir.log" 2>&1 ||
    { say "error: aiperf failed, see $dir.log"; return 1; }
}
