#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the course site: the lab chapters with their figures, the concept
# pages, glossary and sources, their Korean editions, and the API reference of
# engine/, as HTML in OUT/html (default build/docs). Fails on any Doxygen
# warning, then checks the site (tools/check_site.py): every page in the
# navigation in order, every link and image there, no markup left showing.
# Installs Doxygen and Debian's fonts-noto-cjk (Korean in the browser) when missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(mkdir -p "${1:-$root/build/docs}" && cd "${1:-$root/build/docs}" && pwd)"
# The CJK font matters only to a browser showing the site (and the screenshot test, which SKIPs without
# Chromium, as in CI): CI builds and checks the site without it.
wanted=(doxygen)
[ "${CI:-}" = "true" ] || wanted+=(fonts-noto-cjk)
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "servelab: installing ${missing[*]}" >&2
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
# A page of an earlier build (a class since renamed) would stay behind and be checked: start clean.
rm -rf "$out/html" "$out/pages"
python3 "$root/tools/make_site.py" "$root" "$out"
# Debian's doxygen-awesome-css theme and MathJax where installed; Doxygen's own style and the MathJax CDN otherwise.
css=/usr/share/doxygen-awesome-css/doxygen-awesome.css
[ -f "$css" ] || css=""
mathjax=https://cdn.jsdelivr.net/npm/mathjax@2
if [ -d /usr/share/javascript/mathjax ]; then
  mkdir -p "$out/html" && rm -rf "$out/html/mathjax" && cp -r /usr/share/javascript/mathjax "$out/html/mathjax"
  mathjax=mathjax
fi
cd "$root"
{ cat docs/Doxyfile
  echo "OUTPUT_DIRECTORY = $out"
  echo "INPUT = $out/pages engine"
  echo "IMAGE_PATH = $out/pages/images"
  echo "LAYOUT_FILE = $out/pages/layout.xml"
} | SERVELAB_DOXYGEN_CSS="$css" SERVELAB_MATHJAX="$mathjax" doxygen -
python3 "$root/tools/check_site.py" "$root" "$out/html"
echo "servelab: site in $out/html/index.html"
