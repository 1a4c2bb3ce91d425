"""What a planner that will not stop costs a question, before and after it is stopped at its plan
(run by hand; prints and saves plan_stop.json beside itself).

    .venv/bin/python -m benchmarks.perf.plan_stop                 # this tree against main
    .venv/bin/python -m benchmarks.perf.plan_stop --before REV    # against another revision

A real OpenAI-wire server on 127.0.0.1 (tests/support/fakeprovider.py) serves a two-model pool in
which the first model also plans, as a small served model planning for itself does: it streams
one token a chunk, `--token-ms` apart, until the request's `max_tokens`, and reports its usage.
Two planners:

- `runaway`: writes a valid plan, then goes on writing (a model that never emits its end token);
- `no_lists`: never writes its lists.

Each question runs through the real Engine with the real RemoteConductor: the planner's tokens
(the run's conductor_tokens), the question's tokens, its wall time and the planner's calls. The
same script runs under REV's code (git archive into a temporary folder) and under this tree's.
A synthetic pool: the figures say what the planner's tokens and time become, not what a real
model answers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PLAN = (
    "Two drafts and a judge.\n"
    "model_id = [1, 1, 0]\n"
    'subtasks = ["Write the function.", "Write it another way.", "Pick the better of step 0 and step 1."]\n'
    "access_list = [[], [], [0, 1]]"
)
RUNAWAY = " and then the model keeps writing"


def tokens(text: str) -> list[str]:
    """`text` in pieces of about one token (four characters), as a served model streams it."""
    return [text[i : i + 4] for i in range(0, len(text), 4)]


def measure(questions: int, token_ms: float) -> dict:
    """The figures of this process's code (run in a child whose PYTHONPATH names that code)."""
    from stiva_tui.conductor.remote import RemoteConductor
    from stiva_tui.engine.executor import Engine
    from stiva_tui.engine.fallback import FallbackEvidence
    from stiva_tui.pool.client import HttpWorker
    from stiva_tui.pool.types import PoolModel
    from tests.support.fakeprovider import FakeProvider, Reply

    def planner(kind: str):
        def reply(request) -> Reply:
            if "You are the Conductor" not in json.dumps(request.messages):
                return Reply("def f(): return 1", usage=(300, 8))
            head = PLAN if kind == "runaway" else ""
            pieces = tokens(head + RUNAWAY * 2000)[: int(request.body.get("max_tokens") or 4096)]
            prompt = sum(len(str(m.get("content", ""))) // 4 for m in request.messages)
            return Reply(chunks=pieces, chunk_delay_s=token_ms / 1000, usage=(prompt, len(pieces)))

        return reply

    async def scenario(kind: str) -> dict:
        with FakeProvider() as fake:
            fake.default("planner", planner(kind))
            fake.default("worker", Reply("def f(): return 1", usage=(300, 8)))
            models = [
                PoolModel(id=m, provider="fake", model=m, base_url=fake.base_url, description=m)
                for m in ("planner", "worker")
            ]
            runs = []
            for i in range(questions):
                worker = HttpWorker()
                engine = Engine(
                    models, worker, RemoteConductor(models[0], worker), fallback=FallbackEvidence(model="worker")
                )
                calls = len(fake.requests_for("planner"))
                started = time.monotonic()
                result = await engine.run(f"Write a function f that returns 1 (question {i}).")
                seconds = time.monotonic() - started
                await worker.aclose()
                planner_calls = [
                    r for r in fake.requests_for("planner")[calls:] if "You are the Conductor" in json.dumps(r.messages)
                ]
                runs.append(
                    {
                        "status": result.status,
                        "planner_tokens": result.totals.conductor_tokens,
                        "question_tokens": result.totals.prompt_tokens + result.totals.completion_tokens,
                        "seconds": round(seconds, 3),
                        "planner_calls": len(planner_calls),
                        "max_tokens_asked": [r.body.get("max_tokens") for r in planner_calls],
                    }
                )
        return {
            "questions": len(runs),
            "finished": sum(r["status"] == "finished" for r in runs),
            "planner_tokens_p50": statistics.median(r["planner_tokens"] for r in runs),
            "question_tokens_p50": statistics.median(r["question_tokens"] for r in runs),
            "seconds_p50": round(statistics.median(r["seconds"] for r in runs), 3),
            "planner_calls": sorted({r["planner_calls"] for r in runs}),
            "max_tokens_asked": runs[0]["max_tokens_asked"],
        }

    return {kind: asyncio.run(scenario(kind)) for kind in ("runaway", "no_lists")}


def code_of(revision: str, into: Path) -> Path:
    """`revision`'s stiva_tui and tests/support in `into` (git archive): that code, to import."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "stiva_tui", "tests/support"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_child(code: Path, questions: int, token_ms: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json,sys; from benchmarks.perf.plan_stop import measure; "
            f"print(json.dumps(measure({questions}, {token_ms})))",
        ],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=str(code),
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="the revision to compare with (default: main)")
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--token-ms", type=float, default=2.0, help="the planner's time a token")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stiva-plan-stop-") as folder:
        before = code_of(args.before, Path(folder))
        (before / "benchmarks" / "perf").mkdir(parents=True)
        for name in ("benchmarks/__init__.py", "benchmarks/perf/__init__.py", "benchmarks/perf/plan_stop.py"):
            (before / name).write_bytes((ROOT / name).read_bytes())
        figures = {
            "what": "a planner that streams one token a chunk until max_tokens: runaway (a plan, then more) "
            "and no_lists (never a plan); p50 over the questions",
            "token_ms": args.token_ms,
            "before": {"revision": args.before, **run_child(before, args.questions, args.token_ms)},
            "after": {
                "revision": subprocess.run(
                    ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
                ).stdout.strip(),
                **run_child(ROOT, args.questions, args.token_ms),
            },
        }
    from benchmarks.harness import machine, save_json

    figures["machine"] = machine()
    print(json.dumps(figures, indent=2))
    if not args.no_save:
        print("saved", save_json(HERE / "plan_stop.json", figures))


if __name__ == "__main__":
    main()
