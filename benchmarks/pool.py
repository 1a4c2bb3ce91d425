"""Pool benchmark, run by hand: `python benchmarks/pool.py` (saves benchmarks/pool.json).

The built-in `basic` suite (61 items) through the real `stiva bench` machinery (BenchRunner ->
Sessions -> Engine -> HTTP) against a SCRIPTED POOL on 127.0.0.1 whose strengths are known:

- `calc` is right on every numeric and math item, wrong on the rest;
- `quiz` is right on every multiple-choice item, wrong on the rest;
- `generalist` is right on a fixed 60% of every kind (chosen by the item's id), and dearest;
- nobody writes working code (the code items are 0 for every system: they only add rows).

Planners (remote conductors, also scripted):
- `router` plans one step on the model that is strong at the question's kind — a planner that
  knows its pool, which is what the conductor is for;
- `copycat` always plans "Compute 12 times 3." on `quiz`: the garbled plan the 270M base model
  wrote for real models. The plan guard must catch it before any worker sees it.

What it shows: orchestration loses nothing on the way (the conductor with a good planner is at
least as accurate as the best single model), and a garbled plan never reaches a worker (its
questions are answered by one direct step on the strongest model instead). It is not evidence
that a real planner routes well: that needs the simulated pool and training of a later issue.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

from fakeprovider import FakeProvider, Reply  # noqa: E402

from stiva_tui.bench.report import build_report  # noqa: E402
from stiva_tui.bench.runner import BenchRunner  # noqa: E402
from stiva_tui.config import parse_config  # noqa: E402
from stiva_tui.evals.loaders import load_suite  # noqa: E402
from stiva_tui.evals.suite import question_text  # noqa: E402
from stiva_tui.runtime import Runtime  # noqa: E402
from stiva_tui.runtime.modes import ConductorMode, ConductorVariant  # noqa: E402
from stiva_tui.runtime.systems import System, parse_systems  # noqa: E402

SUITE = load_suite("basic")
BY_TEXT = {question_text(item): item for item in SUITE.items}
MODELS = {
    "calc": (0.2, 0.8),
    "quiz": (0.2, 0.8),
    "generalist": (3.0, 15.0),
    "router": (0.1, 0.4),
    "copycat": (0.1, 0.4),
}


def item_of(request):
    text = request.user_text
    for question, item in BY_TEXT.items():
        if question in text:
            return item
    return None


def lucky(item) -> bool:
    return int(hashlib.sha256(item.id.encode()).hexdigest(), 16) % 10 < 6


def right_answer(item) -> str:
    if item.grader == "choice":
        return f"Answer: {item.answer}"
    if item.grader == "math":
        return f"So the answer is $\\boxed{{{item.answer}}}$."
    if item.grader == "code":
        return "```python\nraise NotImplementedError\n```"
    return f"The answer is {item.answer}."


def wrong_answer(item) -> str:
    if item.grader == "choice":
        return "Answer: " + ("A" if item.answer != "A" else "B")
    if item.grader == "numeric":
        return "The answer is 999983."
    return "I do not know."


def worker(strong_at):
    def reply(request):
        item = item_of(request)
        if item is None:
            return Reply("I do not know.", usage=(60, 8))
        good = strong_at(item)
        return Reply(right_answer(item) if good else wrong_answer(item), usage=(80, 20))

    return reply


def router(request):
    item = item_of(request)
    kind = item.grader if item else "numeric"
    index = {"numeric": 0, "math": 0, "choice": 1}.get(kind, 2)
    return Reply(
        f'The question is {kind}.\nmodel_id = [{index}]\nsubtasks = ["Answer the question."]\naccess_list = [[]]',
        usage=(400, 30),
    )


def copycat(request):
    return Reply('model_id = [1]\nsubtasks = ["Compute 12 times 3."]\naccess_list = [[]]', usage=(400, 20))


def config_for(base_url: str):
    return parse_config(
        {
            "providers": [{"name": "sim", "base_url": base_url}],
            "models": [
                {
                    "id": m,
                    "provider": "sim",
                    "model": m,
                    "price_in": p_in,
                    "price_out": p_out,
                    "description": {
                        "calc": "arithmetic and algebra",
                        "quiz": "multiple-choice facts",
                        "generalist": "good at everything, expensive",
                    }.get(m, "planner"),
                }
                for m, (p_in, p_out) in MODELS.items()
            ],
            "conductor": {"backend": "remote", "model": "router"},
            "workers": {"retries": 0},
            "discovery": {"enabled": False},
            "catalog": False,
            "embedded_worker": False,
        }
    )


async def main() -> None:
    fake = FakeProvider().__enter__()
    fake.default("calc", worker(lambda item: item.grader in ("numeric", "math")))
    fake.default("quiz", worker(lambda item: item.grader == "choice"))
    fake.default("generalist", worker(lambda item: item.grader != "code" and lucky(item)))
    fake.default("router", router)
    fake.default("copycat", copycat)
    folder = Path(tempfile.mkdtemp())
    os.environ["STIVA_HOME"] = str(folder)
    runtime = await Runtime.create(config_for(fake.base_url), discover=False, store_path=folder / "pool.db")
    # The workers are numbered 0.. in the conductor's prompt: calc, quiz, generalist, (planners)
    systems = [
        *parse_systems(["direct:calc,direct:quiz,direct:generalist,conductor"]),
        System(
            "conductor (copycat planner)", ConductorMode(variant=ConductorVariant(backend="remote", model="copycat"))
        ),
    ]
    started = time.monotonic()
    try:
        outcome = await BenchRunner(runtime, SUITE, systems, concurrency=8).run()
        replaced = 0
        for record in outcome.records:
            if record.system.startswith("conductor (copycat") and record.run_id:
                trace = runtime.store.get_trace(record.run_id)
                replaced += any("plan replaced" in r.reasoning for r in trace.rounds)
    finally:
        await runtime.aclose()
        fake.__exit__(None, None, None)
    report = build_report(
        SUITE.name, outcome.bench_id, [s.name for s in systems], [item.id for item in SUITE.items], outcome.records
    )
    rows = {row["system"]: row for row in report.model_dump()["systems"]}
    best_single = max(rows[f"direct:{m}"]["accuracy"] for m in ("calc", "quiz", "generalist"))
    copycat_asked = sum(
        1 for r in fake.requests if r.model == "quiz" and "Compute 12 times 3" in json.dumps(r.messages)
    )
    print("SIMULATED (scripted) POOL — basic suite, 61 items")
    for name, row in rows.items():
        print(
            f"  {name:<30} accuracy {row['accuracy']:.3f}  95% CI {row['ci95'][0]:.2f}-{row['ci95'][1]:.2f}"
            f"  tokens/q {row['tokens_per_question']:,.0f}  cost/q ${row['cost_per_question']:.6f}"
        )
    print(
        f"  best single model {best_single:.3f}; conductor {rows['conductor']['accuracy']:.3f}; "
        f"copycat plans replaced {replaced}/61, garbled subtasks that reached a worker: {copycat_asked}"
    )
    out = {
        "label": "simulated pool: scripted models on 127.0.0.1 with known strengths (not real models)",
        "suite": "basic",
        "items": len(SUITE.items),
        "systems": {
            name: {
                k: row[k] for k in ("accuracy", "ci95", "correct", "errors", "tokens_per_question", "cost_per_question")
            }
            for name, row in rows.items()
        },
        "best_single_accuracy": best_single,
        "conductor_at_least_best_single": rows["conductor"]["accuracy"] >= best_single,
        "copycat_plans_replaced": replaced,
        "garbled_subtasks_reaching_a_worker": copycat_asked,
        "wall_s": round(time.monotonic() - started, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (HERE / "pool.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
