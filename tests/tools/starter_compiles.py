# SPDX-License-Identifier: MIT
"""The starter tree's stubs compile, every lab's at once (ctest tools.starter_compiles, label 'tools').

Usage: python3 tests/tools/starter_compiles.py <repo root> <build dir> <scratch dir>

The cheap half of starter_test.sh: it writes the starter tree with every
marked lab stubbed (tools/make_starter.py --labs all), checks that each
region became the stub that names its lab and function, and compiles each
stubbed file with the exact command the build uses for the reference file
(compile_commands.json: same compiler, flags and -Werror), syntax only. It
runs in seconds, so it is in the default run; starter_test.sh, which builds
the whole tree and grades it, is not.
"""
import json
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

root, build, scratch = (pathlib.Path(a).resolve() for a in sys.argv[1:4])
tree = scratch / "tree"
make_starter = [sys.executable, str(root / "tools" / "make_starter.py"), str(root)]
failures = []

listing = subprocess.run(make_starter + ["--list"], capture_output=True, text=True, check=True, timeout=60).stdout
regions = [re.match(r"lab (\d\d)  (\S+):\d+-\d+  (.+)$", line).groups() for line in listing.splitlines()]
if not regions:  # a starter tree: its regions are stubs already
    print("starter_compiles: no marked region (a starter tree?): nothing to check")
    sys.exit(77)
if scratch.exists():
    shutil.rmtree(scratch)
subprocess.run(make_starter + [str(tree), "--labs", "all"], check=True, timeout=60, stdout=subprocess.DEVNULL)

commands_file = build / "compile_commands.json"
if not commands_file.is_file():
    sys.exit(f"starter_compiles: {commands_file}: missing (the build sets CMAKE_EXPORT_COMPILE_COMMANDS)")
commands = {str(pathlib.Path(c["file"]).resolve()): c for c in json.loads(commands_file.read_text())}

for path in sorted({f for _, f, _ in regions}):
    stubbed = (tree / path).read_text()
    for lab, _, name in (r for r in regions if r[1] == path):
        if f'not implemented: lab {lab}, ' not in stubbed or f"// LAB{lab}: write this part: {name}." not in stubbed:
            failures.append(f"{path}: the region '{name}' of lab {lab} did not become its stub")
    source, extra = path, []
    if path.endswith((".h", ".cuh")):
        # A header: one translation unit that includes it, compiled as a file of its folder's library, with
        # the stubbed tree's folder first on the include path so the include finds the stubbed copy.
        top = pathlib.Path(path).parts[0]
        source = next((str(pathlib.Path(f).relative_to(root)) for f in sorted(commands)
                       if f.startswith(str(root / top) + "/") and f.endswith(".cpp")), None)
        unit = scratch / (path.replace("/", "_") + ".cpp")
        unit.write_text(f'#include "{pathlib.Path(path).relative_to(top)}"\n')
        extra = [f"-I{tree / top}"]
    entry = commands.get(str(root / source)) if source else None
    if entry is None:
        failures.append(f"{path}: no compile command in {commands_file}")
        continue
    # The reference file's own command, pointed at the stubbed copy, stopped after the syntax check.
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    target = str(unit) if extra else str(tree / path)
    out = [args[0]] + extra
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c":
            out.append(target if pathlib.Path(a).is_absolute() and a == str(root / source) else a)
    compiled = subprocess.run(out + ["-fsyntax-only"], cwd=entry["directory"], capture_output=True, text=True,
                              timeout=120)
    if compiled.returncode != 0:
        failures.append(f"{path}: the stubbed file does not compile:\n{compiled.stderr[-3000:]}")

for f in failures:
    print("FAILED:", f)
labs = sorted({lab for lab, _, _ in regions})
print(f"starter_compiles: {len(regions)} region(s) of labs {', '.join(labs)} in "
      f"{len({f for _, f, _ in regions})} file(s); {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
