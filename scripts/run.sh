#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Quick start, command 1: install, build, and run the labs in order on their
# embedded synthetic defaults (no download), then draw their plots.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
# The engine's one-line tour: prefill and decode timings on the qwen2.5-0.5b shape.
build/apps/servelab generate --preset qwen2.5-0.5b --prompt-len 64 --max-new-tokens 32
py=/usr/bin/python3
[ -x "$py" ] || py=python3
for lab in 01_autoregressive 02_kv_cache 03_roofline 04_paged_attention 05_flash_attention 06_chunked_prefill \
           07_disaggregation; do
  echo
  "build/labs/lab_$lab" --out results "$@"
  [ "$lab" = 07_disaggregation ] && continue  # no plot yet: its tables are the result
  "$py" tools/plot_lab.py "results/$lab/$lab.json" || echo "(plots skipped: matplotlib missing)" >&2
done
