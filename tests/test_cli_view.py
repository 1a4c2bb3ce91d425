"""The live view of `stiva ask`, drawn from the events of a real run against local providers."""

from __future__ import annotations

import io

from rich.console import Console

from conftest import pool_models
from fakeprovider import Reply
from stiva_tui.cli_view import LiveView
from stiva_tui.conductor.remote import RemoteConductor
from stiva_tui.engine.executor import Engine, RunOptions
from stiva_tui.pool.client import HttpWorker

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
    result = await engine.run("What now?", emit=view.handle,
                              options=RunOptions(retries=0, fallbacks=("cond",)))
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
