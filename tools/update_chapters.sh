#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Reruns every lab with its default settings, draws the plots, and pastes the
# tables and figures into the lab chapters (labs/NN_*/README.md), so the
# numbers in the chapters always come from one real run. Run it on a quiet
# machine after `bash scripts/setup.sh`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
labs=(${SERVELAB_LABS:-01_autoregressive 02_kv_cache 03_roofline 04_paged_attention 05_flash_attention 06_chunked_prefill
                              07_disaggregation})
# Every lab runs before any chapter changes, so each run records a clean git commit.
for lab in "${labs[@]}"; do
  "$root/build/labs/lab_$lab" --out "$root/results"
done
for lab in "${labs[@]}"; do
  if [ "$lab" != 07_disaggregation ]; then  # lab 07 has tables only, no plot yet
    "$py" "$root/tools/plot_lab.py" "$root/results/$lab/$lab.json"
    mkdir -p "$root/labs/$lab/figures"
    cp "$root/results/$lab/"*.png "$root/labs/$lab/figures/"
  fi
  "$py" "$root/tools/paste_results.py" "$root/results/$lab/$lab.json" "$root/labs/$lab/README.md"
done
