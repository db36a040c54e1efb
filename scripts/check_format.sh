#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks that the C++/CUDA lines changed since BASE (default: the parent commit) follow .clang-format.
# Prints the reformatting it would make and exits 1 when there is any; `git clang-format BASE` applies it.
# Also checks that every tracked source file names its licence on an SPDX line (LICENSE: MIT).
# Usage: bash scripts/check_format.sh [BASE]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
base="${1:-HEAD~1}"
missing=$(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh' '*.py' '*.sh' '*.cmake' 'CMakeLists.txt' '*/CMakeLists.txt' .ci/run |
  while read -r f; do head -n 3 "$f" | grep -q 'SPDX-License-Identifier: MIT' || echo "$f"; done)
if [ -n "$missing" ]; then
  echo "$missing"
  echo "check_format: the files above lack the line 'SPDX-License-Identifier: MIT' in their first 3 lines" >&2
  exit 1
fi
command -v git-clang-format > /dev/null || { echo "check_format: git-clang-format is missing (Debian: clang-format)" >&2; exit 1; }
if ! git rev-parse --verify --quiet "$base^{commit}" > /dev/null; then
  # A shallow clone has no parent to compare with: say so (this is not a pass of the check).
  echo "check_format: SKIP: no commit $base to compare with (a shallow clone?); nothing was checked" >&2
  exit 0
fi
out=$(git clang-format --quiet --diff --extensions cpp,h,cu,cuh "$base" -- engine apps labs tests bench || true)
if [ -n "$out" ] && [ "$out" != "no modified files to format" ] && [ "$out" != "clang-format did not modify any files" ]; then
  echo "$out"
  echo "check_format: the lines above changed since $base do not follow .clang-format; run: git clang-format $base" >&2
  exit 1
fi
echo "check_format: the C++ lines changed since $base follow .clang-format" >&2
