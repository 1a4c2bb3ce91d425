"""Benchmark of `stiva bench` itself (run by hand; prints and saves bench.json beside itself).

    .venv/bin/python -m benchmarks.perf.bench

The scripted provider runs in another process (so its threads do not share our GIL) and answers
at once, or after `--latency` seconds like a real endpoint.

1. Harness overhead per item, at concurrency 1 on the instant provider: a bare engine run (no
   store, no grading) against a session run (recorded in the history) against a full bench item
   (session run + grading + the bench's own rows). Median of per-item times over `--items`.
2. Items per second at concurrency 1, 8 and 32 with a provider that takes `--latency` s a call:
   the harness should scale with concurrency until the CPU is the limit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import ROOT, machine, save_json

HERE = Path(__file__).resolve().parent

SERVER = """
import re, sys, time
from tests.support.fakeprovider import FakeProvider, Reply
fake = FakeProvider().start()
def answer(request):
    a, b = re.search(r"What is (\\d+) \\+ (\\d+)", request.user_text).groups()
    return Reply(f"The sum is {{int(a) + int(b)}}.", usage=(10, 2), latency_s={latency})
fake.default("right", answer)
print(fake.base_url, flush=True)
sys.stdin.read()
"""


def start_server(latency: float):
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(latency=latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,  # `-c` puts the working directory on the path: `tests.support` imports
    )
    return process, process.stdout.readline().strip()


def config_for(base_url: str):
    from stiva_tui.config import parse_config

    return parse_config(
        {
            "providers": [{"name": "lab", "base_url": base_url}],
            "models": [{"id": "right", "provider": "lab", "model": "right", "price_in": 1.0, "price_out": 2.0}],
            "workers": {"retries": 0},
            "discovery": {"enabled": False},
            "catalog": False,
            "embedded_worker": False,
        }
    )


def suite_file(folder: Path, n: int, offset: int = 0) -> Path:
    path = folder / f"suite-{offset}-{n}.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{offset + i}",
                    "question": f"What is {offset + i} + {i}?",
                    "answer": str(offset + 2 * i),
                    "grader": "numeric",
                }
            )
            + "\n"
            for i in range(n)
        )
    )
    return path


async def overhead(base_url: str, folder: Path, items: int) -> dict:
    from stiva_tui.bench.runner import BenchRunner
    from stiva_tui.evals.loaders import load_suite
    from stiva_tui.runtime import Runtime
    from stiva_tui.runtime.modes import DirectMode
    from stiva_tui.runtime.sessions import Ask
    from stiva_tui.runtime.systems import parse_systems

    runtime = await Runtime.create(config_for(base_url), discover=False, store_path=folder / "overhead.db")
    try:
        engine = runtime.engine(source="bench")
        engine.subscribers = []  # bare: nothing recorded
        bare, session = [], []
        for i in range(items + 5):
            t = time.perf_counter()
            await engine.run_direct(f"What is {i} + 1?", "right")
            if i >= 5:
                bare.append(time.perf_counter() - t)
        for i in range(items + 5):
            t = time.perf_counter()
            await runtime.sessions.ask(
                Ask(f"What is {i} + 2?", mode=DirectMode("right"), source="bench", in_conversation=False)
            )
            if i >= 5:
                session.append(time.perf_counter() - t)
        runner = BenchRunner(
            runtime, load_suite(str(suite_file(folder, items))), parse_systems(["direct:right"]), concurrency=1
        )
        t = time.perf_counter()
        outcome = await runner.run()
        per_item = (time.perf_counter() - t) / items
        assert all(r.correct for r in outcome.records), "the scripted pool answers right"
    finally:
        await runtime.aclose()
    ms = lambda xs: round(statistics.median(xs) * 1000, 2)  # noqa: E731
    return {
        "items": items,
        "bare_engine_ms": ms(bare),
        "session_run_ms": ms(session),
        "bench_item_ms": round(per_item * 1000, 2),
        "harness_overhead_ms": round(per_item * 1000 - statistics.median(bare) * 1000, 2),
    }


async def throughput(base_url: str, folder: Path, concurrency: int, items: int) -> dict:
    from stiva_tui.bench.runner import BenchRunner
    from stiva_tui.evals.loaders import load_suite
    from stiva_tui.runtime import Runtime
    from stiva_tui.runtime.systems import parse_systems

    runtime = await Runtime.create(
        config_for(base_url), discover=False, store_path=folder / f"throughput-{concurrency}.db"
    )
    try:
        runner = BenchRunner(
            runtime,
            load_suite(str(suite_file(folder, items, offset=1000 * concurrency))),
            parse_systems(["direct:right"]),
            concurrency=concurrency,
        )
        t = time.perf_counter()
        outcome = await runner.run()
        seconds = time.perf_counter() - t
        assert len(outcome.records) == items
    finally:
        await runtime.aclose()
    return {
        "concurrency": concurrency,
        "items": items,
        "seconds": round(seconds, 2),
        "items_per_s": round(items / seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.2, help="provider seconds per call (part 2)")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyrings.alt.file.PlaintextKeyring")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["STIVA_HOME"] = str(folder / "home")
        instant, instant_url = start_server(0.0)
        slow, slow_url = start_server(args.latency)
        try:
            result = {
                "machine": machine(),
                "overhead_per_item": asyncio.run(overhead(instant_url, folder, args.items)),
                "provider_latency_s": args.latency,
                "throughput": [
                    asyncio.run(throughput(slow_url, folder, k, max(args.items, 4 * k))) for k in (1, 8, 32)
                ],
                "when": time.strftime("%Y-%m-%d %H:%M:%S"),
            }
        finally:
            for process in (instant, slow):
                process.kill()
    print(json.dumps(result, indent=2))
    if not args.no_save:
        print(f"saved {save_json(HERE / 'bench.json', result)}")


if __name__ == "__main__":
    main()
