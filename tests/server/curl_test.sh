#!/bin/sh
# SPDX-License-Identifier: MIT
# `servelab serve` driven by curl: the non-streamed and streamed replies carry
# the tokens `servelab generate` prints, with the same text; a bad request is a
# 400 with an OpenAI error object; SIGTERM stops the server with status 0.
# Usage: curl_test.sh SERVELAB MODEL_DIR
set -eu
servelab=$1
model=$2
command -v curl > /dev/null || { echo "SKIP: curl is not installed"; exit 77; }
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT

"$servelab" serve --model "$model" --port 0 --deterministic --threads 1 > "$work/stdout" 2> "$work/stderr" &
pid=$!
for _ in $(seq 100); do grep -q '^listening on ' "$work/stdout" && break; sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$work/stdout")
[ -n "$url" ] || { echo "FAIL: no 'listening on' line"; cat "$work/stderr"; exit 1; }

body='{"prompt": "Prefill and decode", "max_tokens": 8, "temperature": 0'
curl -sS --fail --max-time 20 "$url/v1/completions" -H 'Content-Type: application/json' -d "$body}" > "$work/whole.json"
curl -sS --fail --max-time 20 -N "$url/v1/completions" -H 'Content-Type: application/json' \
  -d "$body, \"stream\": true}" > "$work/stream.txt"
status=$(curl -sS --max-time 20 -o "$work/error.json" -w '%{http_code}' "$url/v1/completions" \
  -H 'Content-Type: application/json' -d '{"prompt": "x", "max_tokens": -1}')
"$servelab" generate --model "$model" --prompt "Prefill and decode" --max-new-tokens 8 --threads 1 > "$work/generate.txt"

python3 - "$work" "$status" << 'PY'
import json, sys
work, status = sys.argv[1], sys.argv[2]
whole = json.load(open(f"{work}/whole.json"))["choices"][0]
events = open(f"{work}/stream.txt").read().split("\n\n")
assert events[-2:] == ["data: [DONE]", ""], events[-2:]
chunks = [json.loads(e[len("data: "):])["choices"][0] for e in events[:-2]]
stream_text = "".join(c["text"] for c in chunks)
stream_ids = [i for c in chunks for i in c["token_ids"]]
generate_ids = next(l for l in open(f"{work}/generate.txt") if l.startswith("output ids")).split()[2:]
checks = {
    "streamed text == non-streamed text": stream_text == whole["text"],
    "streamed ids == non-streamed ids": stream_ids == whole["token_ids"],
    "ids == servelab generate's": [str(i) for i in whole["token_ids"]] == generate_ids,
    "last chunk has the finish reason": chunks[-1]["finish_reason"] == whole["finish_reason"],
    "max_tokens -1 is a 400": status == "400",
    "the 400 is an OpenAI error object": json.load(open(f"{work}/error.json"))["error"]["param"] == "max_tokens",
}
for name, ok in checks.items():
    print(("ok   " if ok else "FAIL ") + name)
sys.exit(0 if all(checks.values()) else 1)
PY

kill -TERM "$pid"
wait "$pid" && code=0 || code=$?
pid=
[ "$code" -eq 0 ] || { echo "FAIL: servelab serve exited $code after SIGTERM"; cat "$work/stderr"; exit 1; }
grep -q 'KV blocks free' "$work/stderr" || { echo "FAIL: no shutdown line"; cat "$work/stderr"; exit 1; }
echo "ok   SIGTERM stops the server with status 0"
