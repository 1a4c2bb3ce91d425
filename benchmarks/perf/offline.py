"""The offline check: simple questions through the real embedded conductor and worker.

    .venv/bin/python -m benchmarks.perf.offline          # the built-in "offline" suite; saves offline.json
    .venv/bin/python -m benchmarks.perf.offline --limit 5 --no-save

Each question of the suite (stiva_tui/evals/data/offline.jsonl: capitals, arithmetic, everyday
facts, in the bench suite format) runs as a real `stiva ask` would: Runtime -> Sessions -> the
embedded conductor plans (under its grammar) -> the engine runs the plan on the embedded worker.
No keys, no network, no GPU. The suite's graders score the answers.

Reported, after the model is loaded: accuracy (also without the arithmetic items, whose answer
the worker copies from a calculator's note: core/arithmetic.py), the median and p90 seconds per question (plan
included) and the plan's share, plan steps, answer length in sentences, and every answer that
echoes a role, a prompt marker or the plan's syntax (the target is none). Saved to offline.json beside this
script.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from benchmarks.harness import machine, save_json
from stiva_tui.config import parse_config
from stiva_tui.core.arithmetic import calculation
from stiva_tui.core.events import StepFinished, WorkflowReady
from stiva_tui.evals.graders import grade
from stiva_tui.evals.loaders import load_suite
from stiva_tui.runtime import Runtime
from stiva_tui.runtime.sessions import Ask

HERE = Path(__file__).resolve().parent
# What a clean answer never holds: chat roles, the prompts' markers, the plan's list syntax.
ECHO = re.compile(
    r"(?im)^\s*(user|assistant|model|question|answer|task|note)\s*:|<[a-z_]+>|\b(model_id|subtasks|access_list)\b|"
    r"<start_of_turn>|<end_of_turn>"
)


def sentences(text: str) -> int:
    return max(1, len([s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]))


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def run(args) -> dict:
    suite = load_suite(args.suite)
    items = suite.items[: args.limit] if args.limit else suite.items
    config = parse_config({"conductor": {"backend": "embedded"}})
    runtime = await Runtime.create(config, with_store=False, discover=False)
    try:
        started = time.monotonic()
        await runtime.ensure_conductor()
        load_s = time.monotonic() - started
        rss_loaded = _status_mb("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # the peak from here on: answering, not loading
        # warm-up: the first generate() builds kernels and caches; not a user's question
        await runtime.sessions.ask(Ask("What is 1 + 1?", source="bench", in_conversation=False))
        rows = []
        for item in items:
            events: list = []
            t0 = time.monotonic()
            outcome = await runtime.sessions.ask(
                Ask(item.question, source="bench", in_conversation=False), emit=events.append
            )
            seconds = time.monotonic() - t0
            result = outcome.result
            plan = next((e for e in events if isinstance(e, WorkflowReady)), None)
            steps = [e for e in events if isinstance(e, StepFinished)]
            verdict = grade(item, result.answer)
            row = {
                "id": item.id,
                "question": item.question,
                "answer": result.answer,
                "status": result.status,
                "correct": bool(verdict.correct),
                "extracted": verdict.extracted,
                "seconds": round(seconds, 2),
                "plan_s": round(plan.latency_s, 2) if plan else None,
                "plan_steps": len(plan.workflow.steps) if plan else 0,
                "subtasks": [s.subtask for s in plan.workflow.steps] if plan else [],
                "worker_tokens": sum(s.usage.completion_tokens for s in steps),
                "sentences": sentences(result.answer),
                "echo": bool(ECHO.search(result.answer)),
                "calculator": calculation(item.question) is not None,
            }
            rows.append(row)
            mark = "+" if row["correct"] else "-"
            print(f"{mark} {row['seconds']:5.1f}s plan {row['plan_s']}s  {item.id}: {result.answer!r}", flush=True)
    finally:
        await runtime.aclose()
    times = sorted(r["seconds"] for r in rows)
    plan_times = [r["plan_s"] for r in rows if r["plan_s"] is not None]
    correct = sum(r["correct"] for r in rows)
    # The worker is given a calculator's result for arithmetic: the model's own share is the rest.
    own = [r for r in rows if not r["calculator"]]
    return {
        "suite": suite.name,
        "questions": len(rows),
        "correct": correct,
        "accuracy": round(correct / len(rows), 3) if rows else None,
        "calculator_items": len(rows) - len(own),
        "accuracy_without_calculator_items": round(sum(r["correct"] for r in own) / len(own), 3) if own else None,
        "median_s_per_question": round(statistics.median(times), 2) if times else None,
        "p90_s_per_question": round(times[int(0.9 * (len(times) - 1))], 2) if times else None,
        "median_plan_s": round(statistics.median(plan_times), 2) if plan_times else None,
        "one_step_plans": sum(r["plan_steps"] == 1 for r in rows),
        "max_sentences": max((r["sentences"] for r in rows), default=0),
        "answers_with_echo": [r["id"] for r in rows if r["echo"]],
        "failed_runs": [r["id"] for r in rows if r["status"] != "finished"],
        "load_s": round(load_s, 1),
        "rss_after_load_mb": round(rss_loaded, 1),
        "peak_rss_answering_mb": round(_status_mb("VmHWM"), 1),
        "peak_rss_with_load_mb": round(peak_rss_mb(), 1),
        "machine": machine(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "items": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default="offline", help="a bench suite: built-in name or JSONL path")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--out", default=str(HERE / "offline.json"))
    args = parser.parse_args()
    report = asyncio.run(run(args))
    summary = {k: v for k, v in report.items() if k != "items"}
    print(json.dumps(summary, indent=2))
    if not args.no_save:
        print(f"saved {save_json(args.out, report)}")


if __name__ == "__main__":
    main()
