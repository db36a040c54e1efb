#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs every libFuzzer target in tests/fuzz for SECONDS seconds each (default
# 60), on seed corpora made from tests/fixtures, with the JSON-key dictionary.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Needs the asan preset's build (cmake --preset asan && cmake --build
# build-asan --target fuzzers). Corpora grow in build-asan/fuzz/corpus/ and
# are reused by the next run; a crash is written to build-asan/fuzz/crashes/
# and makes this script exit non-zero. Each target's last libFuzzer status
# line (executions, coverage) is printed, and a summary at the end.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
shift || true
build="$root/build-asan"
fixtures="$root/tests/fixtures"
work="$build/fuzz"
targets=("$@")
((${#targets[@]})) || targets=(fuzz_safetensors fuzz_safetensors_index fuzz_config fuzz_tokenizer_json
                                fuzz_encode_decode fuzz_chat_template fuzz_control fuzz_gguf
                                fuzz_http_request)

for t in "${targets[@]}"; do
  [ -x "$build/tests/fuzz/$t" ] || { echo "fuzz.sh: $build/tests/fuzz/$t is missing (build the asan preset)" >&2; exit 1; }
done

# Seeds: the fixtures themselves, plus small safetensors files (one tensor
# each) so that mutations of the header are not drowned in weight bytes.
seed() {  # seed TARGET FILE...: copies each FILE into TARGET's corpus as <folder>-<name>
  local target="$1"
  shift
  mkdir -p "$work/corpus/$target"
  for f in "$@"; do cp "$f" "$work/corpus/$target/$(basename "$(dirname "$f")")-$(basename "$f")"; done
}
seed fuzz_config "$fixtures"/*/config.json "$fixtures"/tokenizer/qwen2-tiny-chat/config.json
seed fuzz_safetensors_index "$fixtures"/llama-tiny/model.safetensors.index.json
seed fuzz_tokenizer_json "$fixtures"/tokenizer/*/tokenizer.json
seed fuzz_gguf "$fixtures"/gguf/*.gguf
python3 - "$fixtures" "$work/corpus" <<'EOF'
import glob, json, os, struct, sys
fixtures, corpus = sys.argv[1], sys.argv[2]
os.makedirs(f"{corpus}/fuzz_safetensors", exist_ok=True)
for model in ("qwen2-tiny", "qwen2-tiny-bf16", "llama-tiny-f16"):
    raw = open(f"{fixtures}/{model}/model.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    # The smallest tensor on its own: a 1-D norm weight of a few hundred bytes.
    name = min((k for k in header if k != "__metadata__"),
               key=lambda k: header[k]["data_offsets"][1] - header[k]["data_offsets"][0])
    begin, end = header[name]["data_offsets"]
    small = {"__metadata__": {"format": "pt"}, name: dict(header[name], data_offsets=[0, end - begin])}
    text = json.dumps(small).encode()
    open(f"{corpus}/fuzz_safetensors/{model}-one-tensor", "wb").write(
        struct.pack("<Q", len(text)) + text + data[begin:end])
# Encode/decode: the first byte picks the tokenizer (bit 0) and special tokens
# (bit 1); the text is the tokenizer fixtures' training text, in short pieces
# (short inputs run thousands of times a second; the whole 60 KB, hundreds).
os.makedirs(f"{corpus}/fuzz_encode_decode", exist_ok=True)
texts = ["Hello, world! 안녕하세요 e\u0301\u0316 <|im_start|>user\n", "KV 캐시는 메모리를 많이 사용합니다."]
piece = ""
for line in open(f"{fixtures}/tokenizer/training_text.txt", encoding="utf-8"):
    piece += line
    if len(piece.encode()) > 400:
        texts.append(piece)
        piece = ""
for i, text in enumerate(texts[:40]):
    open(f"{corpus}/fuzz_encode_decode/text-{i}", "wb").write(bytes([i % 4]) + text.encode())
# Chat: template NUL message NUL message ...
os.makedirs(f"{corpus}/fuzz_chat_template", exist_ok=True)
templates = [open(f"{fixtures}/tokenizer/qwen2-tiny-chat/chat_template.jinja").read()]
for style in ("llama3-style", "qwen2-style"):
    config = json.load(open(f"{fixtures}/tokenizer/{style}/tokenizer_config.json"))
    if isinstance(config.get("chat_template"), str):
        templates.append(config["chat_template"])
# The real templates servelab's interpreter is tested on (tests/fixtures/chat_templates/).
for path in sorted(glob.glob(f"{fixtures}/chat_templates/templates/*.jinja")):
    templates.append(open(path, encoding="utf-8").read())
for i, t in enumerate(templates):
    open(f"{corpus}/fuzz_chat_template/template-{i}", "wb").write(
        (t + "\0You are kind.\0What is a KV cache? \uc548\ub155\0It stores keys.").encode())
# Control frames: one of each direction's messages, as the router and workers send them.
os.makedirs(f"{corpus}/fuzz_control", exist_ok=True)
layout = {"num_layers": 2, "num_blocks": 64, "block_size": 4, "kv_dim": 32, "dtype_bytes": 4}
frames = [
    {"type": "submit", "client_req": 0, "prompt": [1, 2, 3], "max_tokens": 4,
     "sampling": {"temperature": 0.7, "top_k": 5, "top_p": 0.9, "seed": 1}, "stop_token_ids": [2]},
    {"type": "register", "role": "prefill", "transport": {"address": "00ff", "regions": [
        {"base": 4096, "length": 65536, "rkey": "ab"}]}, "kv_layout": layout, "model_hash": "0", "ucx_tls": "tcp"},
    {"type": "heartbeat", "worker_id": 0, "session": "5e55"},
    {"type": "kv_ready", "req": 3, "first_token": 7, "src_blocks": [0, 1], "prefill_worker": 1,
     "accounting": {"bytes": 512}},
    {"type": "alloc", "req": 1, "prompt": [4, 5], "max_tokens": 2},
    {"type": "registered", "worker_id": 2, "session": "5e55", "heartbeat_interval": 0.25},
]
for i, f in enumerate(frames):
    open(f"{corpus}/fuzz_control/frame-{i}", "w").write(json.dumps(f))
# Request bodies of both endpoints, as clients send them (the target tries each at both).
os.makedirs(f"{corpus}/fuzz_http_request", exist_ok=True)
bodies = [
    {"model": "tiny-chat", "prompt": "The KV cache", "max_tokens": 8, "temperature": 0, "stream": True,
     "stream_options": {"include_usage": True}, "stop": ["\n", "cache"]},
    {"prompt": [1, 2, 3], "max_tokens": 4, "top_p": 0.9, "top_k": 5, "seed": 7, "ignore_eos": True, "n": 1},
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": [{"type": "text", "text": "\uce90\uc2dc\ub780?"}]}],
     "max_completion_tokens": 16},
    {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 300},
]
for i, b in enumerate(bodies):
    open(f"{corpus}/fuzz_http_request/body-{i}", "w").write(json.dumps(b))
EOF

mkdir -p "$work/crashes" "$work/logs"
status=0
summary=()
for t in "${targets[@]}"; do
  echo "fuzz.sh: $t for ${seconds} s" >&2
  log="$work/logs/$t.log"
  # Short inputs except for tokenizer.json, whose seeds are whole 35 KB files.
  max_len=4096
  [ "$t" = fuzz_tokenizer_json ] && max_len=65536
  [ "$t" = fuzz_gguf ] && max_len=524288  # the seeds are whole small models
  # -rss_limit_mb: ASan's shadow memory counts; 4 GB leaves room on a 2-core CI machine.
  if "$build/tests/fuzz/$t" "$work/corpus/$t" -dict="$root/tests/fuzz/json_keys.dict" -max_total_time="$seconds" -max_len="$max_len" \
       -artifact_prefix="$work/crashes/$t-" -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
    result="ok"
  else
    result="CRASH (see $log and $work/crashes/)"
    status=1
    tail -40 "$log" >&2
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  summary+=("$(printf '%-24s %12s executions  %s' "$t" "$runs" "$result")")
done
printf '%s\n' "fuzz.sh: summary (${seconds} s each)" "${summary[@]}" >&2
exit $status
