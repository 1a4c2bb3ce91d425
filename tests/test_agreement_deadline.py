"""A vote's or gate's agreement deadline counts its comparison's own time, never its wait (issue 57):
gates that compare at once (a bench of many items, a server's many runs) give the same verdicts as
one gate alone, and a comparison that itself overruns still counts as "different" and the run goes
on. Against real HTTP servers, with math-verify made slow for one marked expression (a stand-in for
a comparison that keeps sympy busy) and the deadlines shrunk to keep the test short."""

from __future__ import annotations

import asyncio
import threading
import time

import math_verify
import pytest
from conftest import pool_models

from stiva_tui.core import answers
from stiva_tui.core import events as ev
from stiva_tui.engine import executor
from stiva_tui.engine.baselines import cascade_workflow
from stiva_tui.engine.executor import Engine, RunOptions
from stiva_tui.pool.client import HttpWorker
from tests.support.fakeprovider import Reply

DEADLINE_S = 1.0
SLOW_S = 2.0  # the marked comparison's own time: past its deadline
SLOW_MARK = "$y^3"  # how an expression whose parse takes SLOW_S begins (one per compared pair)


@pytest.fixture
def slow_math(monkeypatch):
    """Deadline DEADLINE_S; math-verify parses an expression that begins SLOW_MARK in SLOW_S (then
    parses it for real), and says when such a parse begins. No comparison is cached from before."""
    monkeypatch.setattr(executor, "AGREEMENT_DEADLINE_S", DEADLINE_S)
    answers._math_equal.cache_clear()
    assert answers.math_equal("z^2+1", "1+z^2")  # math-verify imported and warm, outside any clock
    real_parse = math_verify.parse
    began = threading.Event()

    def parse(text, *args, **kwargs):
        if text.startswith(SLOW_MARK):
            began.set()
            time.sleep(SLOW_S)
        return real_parse(text, *args, **kwargs)

    monkeypatch.setattr(math_verify, "parse", parse)
    yield began
    answers._math_equal.cache_clear()


def _gate_note(events: list) -> str:
    gate = next(e for e in events if isinstance(e, ev.StepFinished) and e.index == 2)
    return gate.note


async def test_a_fast_comparison_queued_behind_a_slow_one_still_agrees(fake, slow_math):
    # Run A's gate compares y^3-2 with -2+y^3 (slow: past its deadline); run B's models answer only
    # once A's comparison is under way, so B's gate must wait for it. Before, B's deadline ran out
    # waiting for math-verify's lock, and B's agreeing answers counted as different.
    fake.default("a1", Reply("so \\boxed{y^3-2}"))
    fake.default("a2", Reply("so \\boxed{-2+y^3}"))
    fake.default("b1", lambda r: Reply("so \\boxed{x^2+1}") if slow_math.wait(10) else Reply("never"))
    fake.default("b2", lambda r: Reply("so \\boxed{1+x^2}") if slow_math.wait(10) else Reply("never"))
    fake.default("strong", Reply("so \\boxed{7}"))
    models = pool_models(fake, "a1", "a2", "b1", "b2", "strong")
    worker = HttpWorker(retries=0)
    engine = Engine(models, worker)
    a_models, b_models = [models[0], models[1], models[4]], [models[2], models[3], models[4]]
    options = RunOptions(answer_kind="math")
    a_events: list = []
    b_events: list = []
    try:
        a, b = await asyncio.gather(
            engine.run_workflow("Q?", cascade_workflow([2, 1]), a_models, emit=a_events.append, options=options),
            engine.run_workflow("Q?", cascade_workflow([2, 1]), b_models, emit=b_events.append, options=options),
        )
    finally:
        await worker.aclose()
    # B: its own comparison is fast, so it agrees, whatever it waited for; strong is asked by A only
    assert _gate_note(b_events) == "2 of 2 agree: x^2+1"
    assert b.status == "finished" and b.answer == "so \\boxed{x^2+1}"
    # A: its comparison itself overran its deadline: the answers count as different, as before,
    # the next stage answers and the run finishes
    assert _gate_note(a_events) == "disagree (?, ?): asking strong"
    assert a.status == "finished" and a.answer == "so \\boxed{7}"
    assert len(fake.requests_for("strong")) == 1


async def test_a_comparison_past_its_own_deadline_counts_as_different_and_the_run_finishes(fake, slow_math):
    fake.default("a1", Reply("so \\boxed{y^3+5}"))
    fake.default("a2", Reply("so \\boxed{5+y^3}"))
    fake.default("strong", Reply("so \\boxed{7}"))
    models = pool_models(fake, "a1", "a2", "strong")
    worker = HttpWorker(retries=0)
    events: list = []
    started = time.monotonic()
    try:
        result = await Engine(models, worker).run_workflow(
            "Q?", cascade_workflow([2, 1]), models, emit=events.append, options=RunOptions(answer_kind="math")
        )
    finally:
        await worker.aclose()
    assert _gate_note(events) == "disagree (?, ?): asking strong"
    assert result.status == "finished" and result.answer == "so \\boxed{7}"
    assert time.monotonic() - started < SLOW_S  # the run went on without waiting for the comparison


async def test_a_comparison_that_waits_past_the_queue_patience_counts_as_different(fake, monkeypatch):
    # the comparison thread held by a runaway comparison: a gate behind it waits its patience, no more
    monkeypatch.setattr(executor, "AGREEMENT_QUEUE_PATIENCE_S", 0.3)
    release = threading.Event()
    executor._comparison_thread().submit(lambda: release.wait(10))
    fake.default("a1", Reply('{"answer": "42"}'))
    fake.default("a2", Reply("The answer is 42."))
    fake.default("strong", Reply("The answer is 41."))
    models = pool_models(fake, "a1", "a2", "strong")
    worker = HttpWorker(retries=0)
    events: list = []
    try:
        result = await Engine(models, worker).run_workflow(
            "What is 6 x 7?",
            cascade_workflow([2, 1]),
            models,
            emit=events.append,
            options=RunOptions(answer_kind="number"),
        )
    finally:
        release.set()
        await worker.aclose()
    assert _gate_note(events) == "disagree (?, ?): asking strong"
    assert result.status == "finished" and result.answer == "The answer is 41."
