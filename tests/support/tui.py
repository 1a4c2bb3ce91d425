"""Helpers for TUI tests: a scripted config over a FakeProvider, a Runtime, and waiting for the UI.

config = make_test_config(fake, extra_models=[{"id": "w3", ...}])
runtime = await make_runtime(config)
app = StivaApp(config, runtime=runtime)
async with app.run_test(size=(140, 42)) as pilot: ...
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from tests.support.fakeprovider import FakeProvider, Reply

PLAN_TWO_STEPS = (
    "I will split this in two: an outline, then the answer.\n"
    'model_id = [1, 2]\nsubtasks = ["Outline the approach", "Answer using the outline"]\n'
    "access_list = [[], [0]]"
)


def make_test_config(fake: FakeProvider, extra_models: list[dict] | None = None, **overrides: Any):
    """A config whose pool is `cond` (the remote conductor), `w1`, `w2` (+ extra) on `fake`.

    Pool indices as the conductor sees them: 0 cond, 1 w1, 2 w2, then extras, then the embedded
    local/gemma-3-270m last."""
    from stiva_tui.config import parse_config

    models = [
        {"id": "cond", "provider": "fake", "model": "cond", "description": "the test conductor"},
        {
            "id": "w1",
            "provider": "fake",
            "model": "w1",
            "price_in": 1.0,
            "price_out": 2.0,
            "description": "test worker one",
        },
        {
            "id": "w2",
            "provider": "fake",
            "model": "w2",
            "price_in": 3.0,
            "price_out": 6.0,
            "description": "test worker two",
        },
        *(extra_models or []),
    ]
    data = {
        "conductor": {"backend": "remote", "model": "cond"},
        "providers": [{"name": "fake", "base_url": fake.base_url}],
        "models": models,
        "workers": {"retries": 0, "timeout_s": 30, "connect_timeout_s": 10},  # generous: 2 busy cores
        "discovery": {"enabled": False},
        "catalog": False,
    }
    for key, value in overrides.items():
        data[key] = value
    return parse_config(data)


async def make_runtime(config, *, load_conductor: bool = True):
    """A Runtime for `config` with its store in STIVA_HOME; a remote conductor is chosen already
    (no model loads: it is a pool model on the FakeProvider)."""
    from stiva_tui.runtime import Runtime

    runtime = await Runtime.create(config, discover=False)
    if load_conductor and config.conductor.backend == "remote":
        await runtime.ensure_conductor()
    return runtime


def script_plan(fake: FakeProvider, plan: str = PLAN_TWO_STEPS, **reply: Any) -> None:
    fake.script("cond", Reply(plan, **reply))


def hold_back_runtime_start(monkeypatch) -> asyncio.Event:
    """Until the returned event is set, `Runtime.create` waits before it builds the runtime (a slow
    start: a busy machine, a cold disk); then it builds it as ever. `monkeypatch` undoes it."""
    from stiva_tui import runtime as runtime_module

    gate = asyncio.Event()
    create = runtime_module.Runtime.create.__func__

    async def held_back(cls, *args, **kwargs):
        await gate.wait()
        return await create(cls, *args, **kwargs)

    monkeypatch.setattr(runtime_module.Runtime, "create", classmethod(held_back))
    return gate


async def wait_for(pilot, predicate: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    """Let the app run until `predicate()` is true (fails the test after `timeout`)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await pilot.pause(0.02)


def replay_run(question: str, events: list):
    """A `run_before` for snapshots: once the conductor shows, the chat screen replays `events` (a
    run of `question`), then the tree, focused, has step 2 of round 1 under its cursor and in the
    live pane."""

    async def run_before(pilot) -> None:
        screen = pilot.app.chat_screen
        await wait_for(pilot, lambda: screen.status_bar.conductor is not None, what="the conductor")
        await screen.replay(question, events)
        screen.tree.focus()
        await pilot.pause(0.2)
        screen.tree.move_cursor(screen.tree.node_for(("step", 1, 1)))
        await pilot.pause(0.2)
        await screen.live.select(("step", 1, 1))
        await pilot.pause(0.2)

    return run_before


def labels(tree) -> list[str]:
    """Every visible label of a Tree as plain text, depth first."""
    out: list[str] = []

    def walk(node) -> None:
        out.append(str(node.label))
        for child in node.children:
            walk(child)

    walk(tree.root)
    return out


async def ask(pilot, text: str) -> None:
    """Type `text` into the prompt and send it with ctrl+j."""
    prompt = pilot.app.screen.query_one("#prompt")
    prompt.focus()
    prompt.insert(text)
    await pilot.press("ctrl+j")


def record_run(
    store, question: str, answer: str, *, system: str = "conductor", totals=None, run_id: str | None = None
) -> str:
    """A finished run written to `store` as the engine's recorder writes one; returns its id."""
    import uuid

    from stiva_tui.core import events as ev
    from stiva_tui.store import Recorder

    run_id = run_id or uuid.uuid4().hex
    mode = "direct" if system.startswith("direct:") else ("moa" if system == "moa" else "conductor")
    recorder = Recorder(store)
    recorder(ev.RunStarted(run_id, question, mode, system=system, source="tui"))
    recorder(ev.RunFinished(run_id, answer, totals or ev.Totals()))
    return run_id


async def close_runtime(runtime) -> None:
    await runtime.aclose()
    await asyncio.sleep(0)


DEMO_QUESTION = "How do I cache an expensive Python function?"
DEMO_ANSWER = """Use `functools.lru_cache` for pure functions of hashable arguments:

```python
from functools import lru_cache

@lru_cache(maxsize=1024)
def price(item_id: int) -> float:
    return slow_lookup(item_id)
```

Call `price.cache_clear()` when the data changes."""


def demo_events(finished: bool = True) -> list:
    """A fixed three-step run (fan-in), mid-run or finished: the same pixels every time."""
    from stiva_tui.core import events as ev
    from stiva_tui.core.usage import Usage
    from stiva_tui.core.workflow import Step, Workflow

    rid = "demo-run"
    workflow = Workflow(
        (
            Step(1, "List the caching options in the standard library", ()),
            Step(2, "Write a short example with lru_cache", ()),
            Step(1, "Combine both into a final answer with code", (0, 1)),
        )
    )
    out0 = "- `functools.lru_cache`\n- `functools.cache`\n- `functools.cached_property`"
    out1 = "```python\n@lru_cache(maxsize=1024)\ndef price(item_id): ...\n```"
    events = [
        ev.RunStarted(rid, DEMO_QUESTION, "conductor", "remote", "cond", "configured in [conductor]"),
        ev.RoundStarted(rid, 1),
        ev.ConductorDelta(rid, 1, "Two independent drafts, then a merge."),
        ev.WorkflowReady(
            rid,
            1,
            workflow,
            "Two independent drafts, then a merge: the stdlib options from w1, "
            "an example from w2, and w1 combines them.",
            Usage(312, 41),
            0.8,
        ),
        ev.StepStarted(rid, 1, 0, "w1", workflow.steps[0].subtask, (), 1),
        ev.StepStarted(rid, 1, 1, "w2", workflow.steps[1].subtask, (), 1),
        ev.StepDelta(rid, 1, 0, out0),
        ev.StepFinished(rid, 1, 0, "w1", out0, Usage(58, 24), 0.000106, 1.2, 1),
        ev.StepFailed(rid, 1, 1, "w2", "fake: stream ended before the answer was complete", 1, "w1"),
        ev.StepStarted(rid, 1, 1, "w1", workflow.steps[1].subtask, (), 2),
        ev.StepDelta(rid, 1, 1, out1[:30]),
    ]
    if finished:
        events += [
            ev.StepDelta(rid, 1, 1, out1[30:]),
            ev.StepFinished(rid, 1, 1, "w1", out1, Usage(61, 33), 0.000127, 2.4, 2),
            ev.StepStarted(rid, 1, 2, "w1", workflow.steps[2].subtask, (0, 1), 1),
            ev.StepFinished(rid, 1, 2, "w1", DEMO_ANSWER, Usage(190, 96), 0.000382, 1.9, 1),
            ev.RunFinished(rid, DEMO_ANSWER, ev.Totals(621, 194, 0.000615, 5.1)),
        ]
    return events
