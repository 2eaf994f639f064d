#!/usr/bin/env python3
"""`cargo test --workspace --no-fail-fast`, with the test binaries run side by side.

`cargo test` runs one test binary after another. Most of ours spend their time waiting (a
stand-in's injected latency, a backoff, a kube-apiserver watch), not computing: the cold
`.ci/run` spent ~16 min in test binaries on a machine that stayed mostly idle. Each binary
starts its own control plane on free ports, and the stand-in ports the tests fix are unique
in the workspace, so binaries can run at the same time. This builds them once (cargo's JSON
messages name every executable), runs them in LANES lanes, longest first by the durations
of the previous run here (target/test-lanes/times.json), else the ones the repository keeps
(e2e/test-lanes-times.json: a fresh clone's order; refresh it by copying the former after a
change in the tests' durations), a binary not timed yet first,
prints each binary's whole output as one block when it ends, then runs the doc tests.
Exits 1 when anything failed, after running everything (cargo's --no-fail-fast).

    python3 e2e/test-lanes.py [LANES]      # default 2, or $TEST_LANES
"""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
OUT = TARGET / "test-lanes"
TIMES = OUT / "times.json"
KEPT_TIMES = ROOT / "e2e" / "test-lanes-times.json"


def log(msg):
    print(f"[lanes] {msg}", flush=True)


def test_binaries():
    """(name, executable, package folder) of every test binary, built here."""
    cmd = ["cargo", "test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"]
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, check=False, text=True)
    if proc.returncode != 0:
        sys.exit(f"[lanes] building the tests failed: {' '.join(cmd)}")
    found = []
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg["profile"]["test"]:
            continue
        # "path+file:///…/actors#terdut-actors@0.1.0" (or "…/actors#0.1.0")
        base, _, fragment = msg["package_id"].partition("#")
        package = fragment.split("@")[0] if "@" in fragment else base.rsplit("/", 1)[-1]
        target = msg["target"]
        name = f"{package}::{'/'.join(target['kind'])}:{target['name']}"
        # cargo runs a test binary in its package's folder.
        found.append((name, msg["executable"], str(Path(msg["manifest_path"]).parent)))
    return found


def main():
    lanes = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TEST_LANES", "2"))
    OUT.mkdir(parents=True, exist_ok=True)
    kept = json.loads(KEPT_TIMES.read_text()) if KEPT_TIMES.is_file() else {}
    previous = {**kept, **(json.loads(TIMES.read_text()) if TIMES.is_file() else {})}
    binaries = test_binaries()
    # Longest first; a binary with no time yet counts as the longest.
    binaries.sort(key=lambda b: -previous.get(b[0], float("inf")))
    log(f"{len(binaries)} test binaries in {lanes} lanes")

    queue = list(binaries)
    lock = threading.Lock()
    times, failed = {}, []
    started = time.monotonic()

    def lane():
        while True:
            with lock:
                if not queue:
                    return
                name, exe, cwd = queue.pop(0)
            out_file = OUT / (name.replace("::", "-").replace("/", "-").replace(":", "-") + ".log")
            t0 = time.monotonic()
            with open(out_file, "w") as out:
                rc = subprocess.run(
                    [exe], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False
                ).returncode
            took = time.monotonic() - t0
            with lock:
                times[name] = round(took, 1)
                if rc != 0:
                    failed.append(name)
                print(f"---- {name} ({os.path.relpath(exe, ROOT)}, {took:.1f} s)", flush=True)
                print(out_file.read_text().rstrip(), flush=True)
                log(f"{name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {took:.1f} s")

    threads = [threading.Thread(target=lane) for _ in range(max(1, lanes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    TIMES.write_text(json.dumps({**previous, **times}, indent=1, sort_keys=True) + "\n")
    log(f"test binaries done in {time.monotonic() - started:.0f} s "
        f"(one after another: {sum(times.values()):.0f} s)")

    doc = subprocess.run(["cargo", "test", "--workspace", "--doc"], cwd=ROOT, check=False)
    if doc.returncode != 0:
        failed.append("doc tests")
    if failed:
        log("FAILED: " + ", ".join(failed))
        sys.exit(1)
    log("every test binary and the doc tests passed")


if __name__ == "__main__":
    main()
