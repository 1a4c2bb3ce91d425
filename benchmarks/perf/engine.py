"""Engine benchmarks, run by hand: `python -m benchmarks.perf.engine` (saves engine.json beside itself).

1. Overhead per step: a one-step run through the engine (events, prompt building, accounting)
   against a bare httpx streaming call to the same local server, interleaved, in one run.
   Target: under 2 ms per step at the median.
2. Parallel efficiency: wall time of a fan-in of N equal workers, divided by the slowest branch
   plus the aggregator. Target: at most 1.05 for N = 2..8.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

import httpx

from benchmarks.harness import machine, save_json
from stiva_tui.engine.executor import Engine, RunOptions
from stiva_tui.pool.client import HttpWorker
from stiva_tui.pool.types import PoolModel
from tests.support.fakeprovider import FakeProvider, Reply

HERE = Path(__file__).resolve().parent

MESSAGES = [
    {"role": "user", "content": "<overall_task>\nQ\n</overall_task>\n\nYour assigned subtask: Answer the question."}
]


async def bare_call(client: httpx.AsyncClient, base_url: str) -> float:
    started = time.perf_counter()
    body = {"model": "w", "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}}
    async with client.stream("POST", f"{base_url}/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                data = line[6:]
                if data != "[DONE]":
                    json.loads(data)
    return time.perf_counter() - started


async def overhead(samples: int = 300) -> dict:
    with FakeProvider() as fake:
        fake.default("w", Reply("one two three four five six seven eight", usage=(20, 8)))
        model = PoolModel(id="w", provider="fake", model="w", base_url=fake.base_url, price_in=1, price_out=1)
        worker = HttpWorker()
        engine = Engine([model], worker)
        bare_client = httpx.AsyncClient()
        events = []
        engine_times, bare_times = [], []
        for i in range(samples + 20):
            started = time.perf_counter()
            await engine.run_direct("Q", "w", emit=events.append, options=RunOptions())
            e = time.perf_counter() - started
            b = await bare_call(bare_client, fake.base_url)
            if i >= 20:  # warm-up
                engine_times.append(e)
                bare_times.append(b)
            events.clear()
        await worker.aclose()
        await bare_client.aclose()
    diffs = [e - b for e, b in zip(engine_times, bare_times)]
    return {
        "samples": samples,
        "engine_median_ms": round(statistics.median(engine_times) * 1e3, 3),
        "bare_httpx_median_ms": round(statistics.median(bare_times) * 1e3, 3),
        "overhead_median_ms": round((statistics.median(engine_times) - statistics.median(bare_times)) * 1e3, 3),
        "overhead_paired_median_ms": round(statistics.median(diffs) * 1e3, 3),
        "target_ms": 2.0,
    }


async def parallel_efficiency(branch_s: float = 0.5, aggregator_s: float = 0.2) -> list[dict]:
    rows = []
    with FakeProvider() as fake:
        names = [f"w{i}" for i in range(8)]
        for name in names:
            fake.default(name, Reply("branch answer", latency_s=branch_s, usage=(5, 2)))
        fake.default("agg", Reply("aggregated", latency_s=aggregator_s, usage=(5, 2)))
        models = [PoolModel(id=n, provider="fake", model=n, base_url=fake.base_url) for n in [*names, "agg"]]
        worker = HttpWorker()
        engine = Engine(models, worker)
        await engine.run_moa("warm-up", names, "agg", layers=1)  # open the connections once
        for n in range(2, 9):
            started = time.perf_counter()
            result = await engine.run_moa("Q", names[:n], "agg", layers=1)
            wall = time.perf_counter() - started
            assert result.status == "finished", result.error
            ideal = branch_s + aggregator_s
            rows.append(
                {
                    "n": n,
                    "wall_s": round(wall, 4),
                    "ideal_s": ideal,
                    "ratio": round(wall / ideal, 4),
                    "sequential_s": n * branch_s + aggregator_s,
                }
            )
        await worker.aclose()
    return rows


async def main() -> None:
    figures = {
        "machine": machine(),
        "overhead_per_step": await overhead(),
        "parallel_efficiency": await parallel_efficiency(),
    }
    out = save_json(HERE / "engine.json", figures)
    o = figures["overhead_per_step"]
    print(
        f"overhead per step: {o['overhead_median_ms']} ms at the median "
        f"(engine {o['engine_median_ms']} ms vs bare httpx {o['bare_httpx_median_ms']} ms; target < 2 ms)"
    )
    for row in figures["parallel_efficiency"]:
        print(
            f"fan-in of {row['n']}: {row['wall_s']:.3f} s / {row['ideal_s']:.3f} s = {row['ratio']:.3f} "
            f"(one after another: {row['sequential_s']:.1f} s; target <= 1.05)"
        )
    print(f"saved {out}")


if __name__ == "__main__":
    asyncio.run(main())
