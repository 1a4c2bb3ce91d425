"""The live view of `stiva ask`, drawn from the events of a real run against local providers."""

from __future__ import annotations

import io

from conftest import pool_models
from rich.console import Console

from stiva_tui.cli.view import LiveView
from stiva_tui.conductor.remote import RemoteConductor
from stiva_tui.engine.executor import Engine, RunOptions
from stiva_tui.pool.client import HttpWorker
from tests.support.fakeprovider import Reply

PLAN = 'model_id = [1, 2]\nsubtasks = ["draft it", "finish it"]\naccess_list = [[], "all"]'


def draw(view: LiveView) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(view.render())
    return console.file.getvalue()


async def test_live_view_shows_steps_fallbacks_and_totals(fake):
    fake.script("cond", Reply(PLAN, usage=(100, 20)))
    fake.script("w1", Reply("first draft", usage=(10, 2)))
    fake.script("w2", Reply("half of an answer", fault="cut"))
    fake.default("cond", Reply("rescued answer", usage=(30, 3)))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker(retries=0)
    engine = Engine(models, worker, RemoteConductor(models[0], worker))
    view = LiveView(Console(file=io.StringIO()), "What now?")
    before = draw(view)
    result = await engine.run("What now?", emit=view.handle, options=RunOptions(retries=0, fallbacks=("cond",)))
    await worker.aclose()
    assert result.status == "finished"
    assert "What now?" in before and "planning" in before
    text = draw(view)
    lines = text.splitlines()
    step0 = next(line for line in lines if "draft it" in line)
    assert "w1" in step0 and "finished" in step0 and "$0.0000" in step0 and "—" in step0
    step1 = next(line for line in lines if "finish it" in line)
    assert "cond" in step1 and "finished (fallback)" in step1 and " all " in step1
    assert any("w2 failed" in line and "→ cond" in line for line in lines)
    assert lines[-1].startswith("finished · 140 in · 25 out")


def test_the_live_view_never_draws_escape_sequences():
    from stiva_tui.core import events as ev
    from stiva_tui.core.usage import Usage
    from stiva_tui.core.workflow import Step, Workflow

    question = "Why\x1b]0;pwned\x07 is the sky\x1b[2J blue?"
    view = LiveView(Console(file=io.StringIO()), question)
    for event in (
        ev.RunStarted("r", question, "conductor"),
        ev.RoundStarted("r", 1),
        ev.ConductorDelta("r", 1, "I will ask\x1b[31m w1"),
        ev.WorkflowReady("r", 1, Workflow((Step(0, "Explain\x1b[1A it", ()),)), "", Usage(), 0.1),
        ev.StepStarted("r", 1, 0, "w1", "Explain\x1b[1A it", ()),
        ev.StepFailed("r", 1, 0, "w1", "HTTP 500: oops\x07\x1b]0;x\x07", 1, "w2"),
    ):
        view.handle(event)
    text = draw(view)
    assert "Why is the sky blue?" in text and "Explain it" in text and "HTTP 500: oops" in text
    assert not any(ch in text for ch in "\x1b\x07") and "]0;" not in text
