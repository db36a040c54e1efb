#!/bin/sh
# SPDX-License-Identifier: MIT
# Careless command lines against `servelab serve`, `bench serve` and `tokenize`: each CASE is one
# mistake that used to hang, crash or mislead, and must now end with one clear error (or a clear
# line) naming the flag or the file. Every command runs under `timeout`, so a hang fails the test.
# Usage: hostile_cli_test.sh SERVELAB MODEL_DIR CASE
set -u
servelab=$1
model=$2
case_name=$3
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$work"/err 2> /dev/null; exit 1; }

# Runs CMD under a 10 s timeout; it must exit 1 and say PATTERN on stderr.
expect_error() {
  pattern=$1
  shift
  timeout 10 "$@" > "$work/out" 2> "$work/err"
  rc=$?
  [ "$rc" -eq 1 ] || fail "exit status $rc (124: it hung), expected 1: $*"
  grep -q -- "$pattern" "$work/err" || fail "stderr does not say '$pattern': $*"
}

# Starts `servelab serve` with the extra flags and waits for its 'listening on' line.
start_server() {
  "$servelab" serve --model "$model" --port 0 --threads 1 "$@" > "$work/stdout" 2> "$work/stderr" &
  pid=$!
  for _ in $(seq 100); do grep -q '^listening on ' "$work/stdout" && return 0; sleep 0.1; done
  cat "$work/stderr"
  return 1
}

case $case_name in
  empty_api_key)
    expect_error "--api-key: empty" "$servelab" serve --model "$model" --port 0 --api-key ''
    ;;
  ipv6_url)
    python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2> /dev/null ||
      { echo "SKIP: no IPv6 loopback"; exit 77; }
    start_server --host ::1 || fail "serve --host ::1 did not start"
    grep -q '^listening on http://\[::1\]:[0-9]*$' "$work/stdout" || fail "not a URL: $(cat "$work/stdout")"
    ;;
  kv_smaller_than_context)
    # 4 blocks of 16 tokens (8192 bytes each) hold 64 of the model's 256 positions.
    start_server --kv-cache-memory 32768 || fail "serve did not start"
    grep -q 'max_model_len lowered from 256 to 64' "$work/stderr" || fail "no lowered max_model_len line"
    url=$(sed -n 's/^listening on //p' "$work/stdout")
    python3 - "$url" << 'PY' || fail "/v1/models or a request without max_tokens"
import json, sys, urllib.request
url = sys.argv[1]
card = json.load(urllib.request.urlopen(url + "/v1/models", timeout=10))["data"][0]
assert card["max_model_len"] == 64, card
req = urllib.request.Request(url + "/v1/completions", json.dumps({"prompt": [1, 2, 3]}).encode(),
                             {"Content-Type": "application/json"})
assert json.load(urllib.request.urlopen(req, timeout=20))["choices"][0]["finish_reason"] in ("stop", "length")
PY
    ;;
  fifo_files)
    mkfifo "$work/text"
    expect_error "text: is a FIFO" "$servelab" tokenize --model "$model" --file "$work/text"
    for file in config.json model.safetensors tokenizer.json; do
      mkdir -p "$work/$file.model"
      cp "$model"/* "$work/$file.model/"
      rm "$work/$file.model/$file"
      mkfifo "$work/$file.model/$file"
      expect_error "$file: is a FIFO" "$servelab" generate --model "$work/$file.model" --prompt hi --max-new-tokens 1
    done
    ;;
  dev_zero_text)
    expect_error "/dev/zero: is a character device" "$servelab" tokenize --model "$model" --file /dev/zero
    ;;
  bench_socket_limit)
    start_server || fail "serve did not start"
    port=$(sed -n 's/^listening on http:.*:\([0-9]*\)$/\1/p' "$work/stdout")
    # 400 requests at once under ulimit -n 48: the client holds the connections the limit leaves, the other
    # requests wait for one (as under --max-concurrency), and every request completes.
    (ulimit -n 48 && timeout 60 "$servelab" bench serve --port "$port" --num-prompts 400 --request-rate inf \
      --prompt-len-dist fixed:4 --output-len-dist fixed:2 > "$work/out" 2> "$work/err")
    rc=$?
    [ "$rc" -eq 0 ] || fail "bench serve under ulimit -n 48: exit status $rc, expected 0"
    grep -q "ulimit -n allowed [0-9]* connections at once" "$work/err" || fail "no line on the connection limit"
    grep -q "^Successful requests: *400 *$" "$work/out" || fail "not every request completed: $(cat "$work/out")"
    # A limit that leaves no descriptor for a connection is one clear error, not a run of failed requests.
    expect_error "ulimit -n leaves no file descriptor for a connection" \
      sh -c "ulimit -n 12 && exec '$servelab' bench serve --port $port --num-prompts 4"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
