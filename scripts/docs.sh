#!/usr/bin/env bash
# Optional: builds the Doxygen HTML into build/docs/html.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! command -v doxygen >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends doxygen >&2
fi
mkdir -p "$root/build/docs"
cd "$root" && doxygen docs/Doxyfile
echo "servelab: docs in $root/build/docs/html/index.html"
