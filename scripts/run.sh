#!/usr/bin/env bash
# Quick start, command 1: install, build, and run the main job on the
# embedded default (the qwen2.5-0.5b shape with synthetic weights; no download).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/build/apps/servelab" generate --preset qwen2.5-0.5b --prompt-len 64 --max-new-tokens 32 "$@"
