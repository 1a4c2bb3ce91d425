"""`stiva()`: the real `stiva` command (the venv's own entry point) in a subprocess.

Tests call it with `home=` (an isolated STIVA_HOME) and read the completed process; benchmarks call it
with `what=`, which echoes the command, times it and exits the script with stiva's stderr on failure.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

STIVA = str(Path(sys.executable).parent / "stiva")
ROOT = Path(__file__).resolve().parents[2]  # the repository


def stiva(
    *args: str,
    home: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 120,
    fsize: int | None = None,
    prefix: tuple[str, ...] = (),
    pythonpath: bool = False,
    what: str | None = None,
) -> subprocess.CompletedProcess:
    """`stiva ARGS`, its output captured as text.

    - `home`: STIVA_HOME for this call; `env`: the environment to start from (default: this one's).
    - `fsize`: caps every file it writes at that many bytes (a full disk); `prefix`: words before it.
    - `pythonpath`: the repository root on PYTHONPATH, so that a `--pool` or plugin it names from
      `tests.support` or `benchmarks` imports.
    - `what`: a benchmark's step: print `$ stiva ...`, time it, and exit with its stderr if it fails.
    """
    environment = dict(os.environ if env is None else env)
    if home is not None:
        environment["STIVA_HOME"] = str(home)
    if pythonpath:
        environment["PYTHONPATH"] = str(ROOT)

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    if what is not None:
        print(f"$ stiva {' '.join(args)}", flush=True)
    started = time.monotonic()
    done = subprocess.run(
        [*prefix, STIVA, *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
        preexec_fn=limit if fsize is not None else None,
    )
    if what is not None:
        print(f"  {what}: exit {done.returncode} in {time.monotonic() - started:.0f} s", flush=True)
        if done.returncode != 0:
            sys.exit(f"{what} failed:\n{done.stderr[-3000:]}")
    return done
