#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Headless Chromium against a running `servelab serve`: the /dashboard page's block
grid shows as many blocks in use as the engine held at the step the page shows.

usage: dashboard_browser_test.py SERVELAB [CHROMIUM] [SCREENSHOT.png]
Exits 77 (SKIP) when no Chromium is found. The server runs with --trace, so the
blocks the engine held at every step are read back from the trace afterwards and
compared with the grid's count at the step the page shows."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SKIP = 77


def find_chromium(given):
    for name in ([given] if given else []) + ["chromium", "chromium-browser", "google-chrome", "headless_shell"]:
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


def post(port, max_tokens, prompt):
    body = json.dumps({"model": "small", "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        r.read()


def main():
    servelab = sys.argv[1]
    chromium = find_chromium(sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None)
    screenshot = sys.argv[3] if len(sys.argv) > 3 else None
    if not chromium:
        print("SKIP: no Chromium (chromium, chromium-browser, google-chrome) on PATH")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="servelab_dashboard_")
    trace = os.path.join(tmp, "serve.json")
    # A pool of 128 blocks of 16 tokens (2,048 tokens of the small preset's 2 KiB each), which four requests of
    # 59 + 400 tokens hold by half and more: long enough to be running while the browser reads three batches.
    server = subprocess.Popen([servelab, "serve", "--preset", "small", "--port", "0", "--threads", "1",
                               "--max-num-seqs", "4", "--max-model-len", "512", "--block-size", "16",
                               "--kv-cache-memory", "4194304",
                               "--trace", trace],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        m = re.search(r":(\d+)\s*$", line)
        if not m:
            print("FAIL: no 'listening on' line:", line, server.stderr.read())
            return 1
        port = int(m.group(1))
        clients = [threading.Thread(target=post, args=(port, 400, list(range(1 + i, 60 + i)))) for i in range(4)]
        for c in clients:
            c.start()
        time.sleep(1.0)  # the requests are running: blocks are held
        # 5 s of virtual time for the page's three batches: 1.5 s was too short beside other tests under load.
        args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + os.path.join(tmp, "ud"),
                "--virtual-time-budget=5000", "--window-size=1280,720"]
        # ?batches=3: the page stops listening after three batches, so the browser's network goes idle and it dumps.
        url = f"http://127.0.0.1:{port}/dashboard?batches=3"
        dom = subprocess.run(args + ["--dump-dom", url], capture_output=True, text=True, timeout=60).stdout
        if screenshot:
            subprocess.run(args + ["--screenshot=" + screenshot, url], capture_output=True, timeout=60)
        for c in clients:
            c.join()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    grid = re.search(r'<div id="grid" data-used="(\d+)" data-blocks="(\d+)" data-step="(-?\d+)"', dom)
    if not grid:
        print("FAIL: no block grid in the page's DOM:\n", dom[:2000])
        return 1
    used, blocks, step = (int(g) for g in grid.groups())
    cells = len(re.findall(r'class="cell used"', dom))
    with open(trace) as f:
        events = json.load(f)
    tables, used_at = {}, {}
    for e in events:
        if e.get("ph") == "X" and e.get("tid") == 0 and e.get("name") == "step":
            a = e["args"]
            for rid in a["freed"]:
                tables.pop(rid, None)
            for rid, b in a["blocks"].items():
                tables[int(rid)] = b
            used_at[a["step"]] = sum(len(b) for b in tables.values())
    print(f"page: step {step}, {used} of {blocks} blocks in use ({cells} cells drawn used); "
          f"trace: {used_at.get(step)} at that step")
    ok = blocks == 128 and used > 0 and cells == used and used_at.get(step) == used
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
