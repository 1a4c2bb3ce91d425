"""`stiva ask` cold and warm on the embedded model (issue 43, part 3): the goal is a second ask in ≤ 3 s.

    .venv/bin/python -m benchmarks.perf.ask_warm            # saves ask_warm.json beside this script
    .venv/bin/python -m benchmarks.perf.ask_warm --warm 5 --no-save

In a fresh STIVA_HOME (the converted model shared from the usual cache, no hub, no keys, no
discovery), the real `stiva` command, wall time of each process as a user waits for it:
- `cold_in_process_s`: `stiva ask --no-warm`, which loads the model in its own process (before);
- `first_s`: the first `stiva ask`, which starts the warm worker and waits for it to load the model;
- `warm_s`: each later `stiva ask`, answered by that worker (the figure the goal is about).
The worker is stopped at the end (by its pid).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import time
from pathlib import Path

from benchmarks.harness import machine, save_json, stiva, stiva_env, temporary_home

CONFIG = "catalog = false\n[discovery]\nenabled = false\n"
QUESTIONS = ("What is the capital of France?", "What is the capital of Italy?", "What is 12 plus 30?")


def timed(env: dict, *args: str) -> float:
    started = time.monotonic()
    done = stiva(*args, env=env, timeout=900)
    took = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"stiva {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    print(f"  {took:6.2f} s  stiva {' '.join(args)}  → {done.stdout.strip()[:60]!r}", flush=True)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=3, help="warm asks to time (default 3)")
    parser.add_argument("--no-save", action="store_true")
    options = parser.parse_args()
    with temporary_home("stiva-ask-warm-") as home:
        env = stiva_env(home, CONFIG)
        cold = timed(env, "ask", QUESTIONS[0], "--no-warm")
        first = timed(env, "ask", QUESTIONS[0])
        warm = [timed(env, "ask", QUESTIONS[i % len(QUESTIONS)]) for i in range(options.warm)]
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            from stiva_tui.cli import warm as worker

            status = asyncio.run(worker.worker_status())
        finally:
            os.environ.clear()
            os.environ.update(saved)
        if status is not None:
            os.kill(status["pid"], signal.SIGTERM)
    figures = {
        "machine": machine(),
        "cold_in_process_s": round(cold, 2),
        "first_s": round(first, 2),
        "warm_s": [round(s, 2) for s in warm],
        "warm_median_s": round(statistics.median(warm), 2),
        "worker_served": status["served"] if status else None,
        "goal_s": 3.0,
    }
    print(figures)
    if not options.no_save:
        print("saved", save_json(Path(__file__).with_suffix(".json"), figures))


if __name__ == "__main__":
    main()
