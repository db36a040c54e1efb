#!/bin/sh
# SPDX-License-Identifier: MIT
# The `openai` package from PyPI against `servelab serve` (openai_client.py).
# SKIP (77) when VENV has no python with the package: scripts/setup.sh makes it
# (CI=true, or SERVELAB_OPENAI_VENV=1); tests never download.
# Usage: openai_test.sh SERVELAB MODEL_DIR VENV CLIENT_PY
set -eu
servelab=$1
model=$2
python=$3/bin/python
client=$4
[ -x "$python" ] && "$python" -c 'import openai' 2> /dev/null ||
  { echo "SKIP: no openai package in $3 (scripts/setup.sh installs it)"; exit 77; }
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT
"$servelab" serve --model "$model" --port 0 --deterministic --threads 1 --api-key test-key \
  --served-model-name tiny-chat > "$work/stdout" 2> "$work/stderr" &
pid=$!
for _ in $(seq 100); do grep -q '^listening on ' "$work/stdout" && break; sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$work/stdout")
[ -n "$url" ] || { echo "FAIL: no 'listening on' line"; cat "$work/stderr"; exit 1; }
"$python" "$client" "$url/v1" test-key tiny-chat
