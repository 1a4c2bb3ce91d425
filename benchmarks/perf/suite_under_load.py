"""The test suite with every core busy beside it: the flakes that only a loaded machine shows.

    python -m benchmarks.perf.suite_under_load [--hogs N] [--workers 2] [--runslow] [--no-save]

Starts N busy loops (default: one per core, each a process spinning in Python), runs the fast lane
(`pytest -n WORKERS`; `--runslow`: everything) beside them, stops them, and saves what pytest
said: passed, failed (with each failed test's id), the lane's time, and the load average seen.
A test that fails here and passes on a quiet machine is a flake to make deterministic.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import subprocess
import sys
import time

from benchmarks.harness import HERE, ROOT, machine, save_json

OUT = HERE / "perf" / "suite_under_load.json"


def spin() -> None:
    while True:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="busy loops beside the suite")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument("--runslow", action="store_true", help="the whole suite, not the fast lane")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    hogs = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.hogs)]
    for hog in hogs:
        hog.start()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(args.workers), "tests"]
    if args.runslow:
        command.append("--runslow")
    print("$", " ".join(command[2:]), f"beside {args.hogs} busy loops", flush=True)
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        load = os.getloadavg()
    finally:
        for hog in hogs:
            hog.terminate()
    seconds = time.monotonic() - started
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", summary)}
    # pytest's short summary: "FAILED id - the first line of why"
    failed = sorted({line[:400] for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))})
    figures = {
        "what": "the test suite beside busy loops, one per core unless --hogs says: pytest's own counts and time",
        "lane": "everything (--runslow)" if args.runslow else "fast lane",
        "hogs": args.hogs,
        "workers": args.workers,
        "returncode": done.returncode,
        "counts": counts,
        "failed": failed,
        "seconds": round(seconds, 1),
        "load_average_at_end": [round(x, 2) for x in load],
        "summary": summary,
        "machine": machine(),
    }
    print(summary)
    for test in failed:
        print("  failed:", test)
    if not args.no_save:
        save_json(OUT, figures)
        print(f"saved {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
