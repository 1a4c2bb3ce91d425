"""The embedded conductor's plans with and without the prompt's prefix cache (run by hand):

    .venv/bin/python -m benchmarks.perf.prefix_cache        # prints and saves prefix_cache.json beside itself

The base conductor prompt is a static prefix (the intro, the models, the worked examples: about a
thousand tokens for five models) and a short case. `generate_sync(prefix_tokens=...)` keeps the
prefix's KV cache on the loaded model and prefills only the case. Four multi-part questions (which
the embedded conductor plans, at most 2 steps) on five simulated-pool-like workers, in turns with
the cache off and on, twice; the first plan with the cache on pays for computing it and is listed
apart. Greedy; how many plans came out identical either way is counted (bf16 sums in another
order can flip a near-tie).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.harness import machine, save_json
from stiva_tui.conductor import local
from stiva_tui.conductor.base import PlanRequest, WorkerInfo
from stiva_tui.conductor.embedded import EmbeddedConductor

HERE = Path(__file__).resolve().parent

WORKERS = [
    WorkerInfo("sim:calc", "arithmetic specialist", price_in=0.1, price_out=0.2),
    WorkerInfo("sim:facts", "facts specialist", price_in=0.1, price_out=0.2),
    WorkerInfo("sim:units", "unit conversions", price_in=0.1, price_out=0.2),
    WorkerInfo("sim:code", "writes code", price_in=0.1, price_out=0.2),
    WorkerInfo("sim:generalist", "good at everything, expensive", price_in=3, price_out=6),
]
QUESTIONS = [
    "Convert 5 miles to kilometres and then say which is longer, a mile or a kilometre, and why that matters.",
    "Write a Python function that returns the sum of squares of a list, and explain its complexity in one sentence.",
    "What is the capital of Australia, and how many people live there, and which ocean is nearest to it?",
    "Explain in two parts why the sky is blue and why sunsets are red, with an everyday example of each.",
]


async def run() -> dict:
    conductor = EmbeddedConductor()
    await conductor.load()
    static = local.HFConductor._static_prefix_tokens
    off = staticmethod(lambda *args: 0)
    local.HFConductor._static_prefix_tokens = off
    await conductor.plan(PlanRequest("Warm up: what is two plus two, and why, in two sentences?", WORKERS, max_steps=2))
    times: dict[str, list[float]] = {"off": [], "on": []}
    plans: dict[str, list[str]] = {"off": [], "on": []}
    first_on = None
    for name in ("off", "on", "off", "on"):
        local.HFConductor._static_prefix_tokens = staticmethod(static) if name == "on" else off
        for question in QUESTIONS:
            started = time.monotonic()
            plan = await conductor.plan(PlanRequest(question, WORKERS, max_steps=2))
            seconds = time.monotonic() - started
            if name == "on" and first_on is None:
                first_on = seconds  # computes the prefix's cache
            else:
                times[name].append(seconds)
            plans[name].append(plan.raw_text)
            print(f"cache {name:3}  {seconds:5.2f} s  {question[:60]}", flush=True)
    local.HFConductor._static_prefix_tokens = staticmethod(static)
    off_median, on_median = statistics.median(times["off"]), statistics.median(times["on"])
    return {
        "what": "embedded conductor (Gemma-3 270M, bf16, CPU) planning 4 multi-part questions for 5 workers, "
        "the base prompt's static prefix prefilled every time (off) or its KV cache reused (on)",
        "plan_s_median": {"off": round(off_median, 2), "on": round(on_median, 2)},
        "speedup": round(off_median / on_median, 2),
        "first_plan_with_cache_s": round(first_on or 0.0, 2),
        "runs_s": {k: [round(v, 2) for v in vs] for k, vs in times.items()},
        # bf16 sums in another order (the prefix prefilled apart) can flip a near-tie of greedy
        # decoding: the plans are the same up to that rounding, not always token for token.
        "identical_plans": sum(a == b for a, b in zip(plans["off"], plans["on"])),
        "plans": len(plans["on"]),
        "machine": machine(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def main() -> None:
    report = asyncio.run(run())
    print(json.dumps(report, indent=2))
    print(f"saved {save_json(HERE / 'prefix_cache.json', report)}")


if __name__ == "__main__":
    main()
