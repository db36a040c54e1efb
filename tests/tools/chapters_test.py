# SPDX-License-Identifier: MIT
"""Checks the lab chapters' pasted results (ctest docs.chapter_tables).

Usage: python3 tests/tools/chapters_test.py <repo root>
Every <!-- results:NAME --> block that tools/paste_results.py fills must hold
something: an empty block means a table the lab no longer writes, or a name
the paster could not match, and the chapter would show nothing.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
BLOCK = re.compile(r"<!-- results:([\w.-]+) -->(.*?)<!-- /results -->", re.S)
problems, blocks = [], 0
for chapter in sorted(root.glob("labs/[0-9][0-9]_*/README.md")):
    for name, body in BLOCK.findall(chapter.read_text()):
        blocks += 1
        if not body.strip():
            problems.append(f"{chapter.relative_to(root)}: results block '{name}' is empty")
for p in problems:
    print("chapters_test:", p)
print(f"chapters_test: {blocks} results blocks, {len(problems)} empty")
sys.exit(1 if problems else 0)
