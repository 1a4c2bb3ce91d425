"""Running the real `stiva` command from a benchmark script: the venv's own, one line per call."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

STIVA = str(Path(sys.executable).parent / "stiva")


def run(args: list[str], env: dict, what: str) -> subprocess.CompletedProcess:
    """`stiva ARGS` with `env`, timed; exits the script with stiva's stderr when it fails."""
    print(f"$ stiva {' '.join(args)}", flush=True)
    started = time.monotonic()
    done = subprocess.run([STIVA, *args], capture_output=True, text=True, env=env)
    print(f"  {what}: exit {done.returncode} in {time.monotonic() - started:.0f} s", flush=True)
    if done.returncode != 0:
        sys.exit(f"{what} failed:\n{done.stderr[-3000:]}")
    return done
