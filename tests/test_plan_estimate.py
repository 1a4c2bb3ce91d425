"""A plan is priced before its calls, the budget uses that price, and counts tell the truth.

Against real HTTP providers on 127.0.0.1 (tests/support/fakeprovider.py): the `PlanEstimated`
event comes after the plan and before the first worker call; a `--budget-usd` the estimate is
over cuts the plan to the steps that fit, or refuses it before any call, in one line; a step
cancelled mid-answer keeps what it streamed in the run's totals and in the folded `RunState`."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import pool_models

from stiva_tui.conductor.remote import RemoteConductor
from stiva_tui.core import events as ev
from stiva_tui.core.run_state import RunState
from stiva_tui.core.usage import estimate_prompt_tokens, estimate_text_tokens
from stiva_tui.engine.estimate import DEFAULT_ANSWER_TOKENS
from stiva_tui.engine.executor import Engine, RunOptions
from stiva_tui.pool.client import HttpWorker
from tests.support.fakeprovider import Reply

PRICE_IN, PRICE_OUT = 1.0, 2.0  # USD per 1M tokens (conftest's pool_models)


def plan(models, subtasks, access) -> str:
    return (
        f"Plan.\nmodel_id = {json.dumps(models)}\nsubtasks = {json.dumps(subtasks)}\naccess_list = {json.dumps(access)}"
    )


def engine_over(fake, *names, **kwargs):
    models = pool_models(fake, "cond", *names)
    worker = HttpWorker(retries=0)
    return Engine(models, worker, RemoteConductor(models[0], worker), **kwargs), worker


# --- the estimate -------------------------------------------------------------------------------


async def test_the_plan_is_priced_after_it_is_written_and_before_any_call(fake):
    fake.script("cond", Reply(plan([1, 2], ["Draft it.", "Improve step 0."], [[], [0]]), usage=(300, 40)))
    fake.default("w1", Reply("a draft", usage=(50, 3)))
    fake.default("w2", Reply("the answer", usage=(80, 4)))
    engine, worker = engine_over(fake, "w1", "w2", typical_outputs={"w2": 120})
    events: list = []
    result = await engine.run("What is 6 times 7?", emit=events.append)
    await worker.aclose()
    assert result.status == "finished"
    names = [type(e).__name__ for e in events if not isinstance(e, ev.StepDelta)]
    assert names.index("WorkflowReady") < names.index("PlanEstimated") < names.index("StepStarted")
    (estimate,) = [e for e in events if isinstance(e, ev.PlanEstimated)]
    first, second = estimate.steps
    # step 0 reads nothing: its prompt is what was sent, counted so as not to undercount
    sent = fake.requests_for("w1")[0].messages
    assert first.prompt_tokens == estimate_prompt_tokens(sent)
    assert estimate_prompt_tokens(sent) >= sum(len(m["content"]) for m in sent) / 4
    # no history for w1: the default answer; w2's typical answer comes from the history
    assert (first.completion_tokens, first.source) == (DEFAULT_ANSWER_TOKENS, "default")
    assert (second.completion_tokens, second.source) == (120, "history")
    # step 1 reads step 0: its prompt expects step 0's answer in it
    assert second.prompt_tokens > DEFAULT_ANSWER_TOKENS
    for step in (first, second):
        assert step.cost_usd == pytest.approx(
            (step.prompt_tokens * PRICE_IN + step.completion_tokens * PRICE_OUT) / 1e6
        )
    assert estimate.cost_usd == pytest.approx(first.cost_usd + second.cost_usd)
    assert estimate.kept == 2 and estimate.note == ""
    # the run's own state shows it beside the final figures
    state = RunState()
    for event in events:
        state.apply(event)
    assert state.rounds[0].expected_cost == pytest.approx(estimate.cost_usd)
    assert state.step(1, 1).expected_cost == pytest.approx(second.cost_usd) and state.step(1, 1).cost_usd > 0


async def test_max_tokens_caps_the_expected_answer(fake):
    fake.script("cond", Reply(plan([1], ["Answer."], [[]])))
    fake.default("w1", Reply("ok"))
    engine, worker = engine_over(fake, "w1")
    events: list = []
    await engine.run("Q?", emit=events.append, options=RunOptions(max_tokens=50))
    await worker.aclose()
    (estimate,) = [e for e in events if isinstance(e, ev.PlanEstimated)]
    assert (estimate.steps[0].completion_tokens, estimate.steps[0].source) == (50, "max_tokens")


# --- the budget ---------------------------------------------------------------------------------


async def test_a_budget_the_estimate_is_over_cuts_the_plan_to_fit(fake):
    fake.script("cond", Reply(plan([1, 1, 2], ["One.", "Two.", "Three."], [[], [], [0, 1]]), usage=(0, 0)))
    fake.default("w1", Reply("first answer", usage=(10, 2)))
    fake.default("w2", Reply("never", usage=(10, 2)))
    engine, worker = engine_over(fake, "w1", "w2")
    # one step costs about (120 + 400 * 2) / 1e6: room for one, not two
    one = (estimate_prompt_tokens([{"content": "x" * 400}]) * PRICE_IN + DEFAULT_ANSWER_TOKENS * PRICE_OUT) / 1e6
    events: list = []
    result = await engine.run("Q?", emit=events.append, options=RunOptions(budget_usd=one * 1.5))
    await worker.aclose()
    (estimate,) = [e for e in events if isinstance(e, ev.PlanEstimated)]
    assert estimate.kept == 1 and "cut to 1 of 3 steps" in estimate.note and "over the budget" in estimate.note
    assert result.status == "finished" and result.answer == "first answer"
    assert len(fake.requests_for("w1")) == 1 and not fake.requests_for("w2")
    skipped = [e for e in events if isinstance(e, ev.StepSkipped)]
    assert [e.index for e in skipped] == [1, 2] and all("over the budget" in e.reason for e in skipped)
    state = RunState()
    for event in events:
        state.apply(event)
    assert [s.status for s in state.rounds[0].steps] == ["finished", "skipped", "skipped"]
    assert "cut to 1 of 3" in state.rounds[0].budget_note


async def test_a_budget_below_the_first_step_is_refused_before_any_call(fake):
    fake.script("cond", Reply(plan([1], ["Answer."], [[]]), usage=(0, 0)))
    fake.default("w1", Reply("never"))
    engine, worker = engine_over(fake, "w1")
    events: list = []
    result = await engine.run("Q?", emit=events.append, options=RunOptions(budget_usd=0.0000001))
    await worker.aclose()
    assert result.status == "failed" and result.failure == "budget"
    assert "refused before any call" in result.error and "\n" not in result.error
    assert not fake.requests_for("w1")
    assert isinstance(events[-1], ev.RunFailed) and not any(isinstance(e, ev.StepStarted) for e in events)


# --- live and cancelled counts ------------------------------------------------------------------


async def test_a_cancelled_step_keeps_what_it_streamed(fake):
    fake.script("cond", Reply(plan([1], ["Write at length."], [[]]), usage=(100, 20)))
    fake.default("w1", Reply("word " * 200, chunk_delay_s=0.02, usage=(999, 999)))
    engine, worker = engine_over(fake, "w1")
    events: list = []
    state = RunState()

    def emit(event):
        events.append(event)
        state.apply(event)

    task = asyncio.create_task(engine.run("Q?", emit=emit))
    for _ in range(200):
        await asyncio.sleep(0.02)
        if state.step(1, 0).streamed_chars >= 40:
            break
    # while it streams the live count includes it, marked as an estimate
    prompt, completion, cost, estimated = state.live()
    assert estimated and completion > 20 and cost > 0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await worker.aclose()
    cancelled = events[-1]
    assert isinstance(cancelled, ev.RunCancelled)
    step = state.step(1, 0)
    streamed = estimate_text_tokens(step.output)
    assert step.status == "cancelled" and step.estimated
    assert step.completion_tokens >= streamed > 0 and step.cost_usd > 0
    # the run's totals: the plan's count and the step's spend (never the 0→0 it once said)
    t = cancelled.totals
    assert t.estimated and t.completion_tokens >= 20 + streamed and t.cost_usd > (100 * 1 + 20 * 2) / 1e6
    assert state.live() == (t.prompt_tokens, t.completion_tokens, t.cost_usd, True)


# --- the command line ---------------------------------------------------------------------------


def test_stiva_ask_json_carries_the_estimate_and_a_budget_refuses_in_one_line(fake, tmp_path, stiva_home):
    from tests.support.cli import run_stiva
    from tests.test_cli import write_config

    fake.default("cond", Reply(plan([1, 2, 1], ["draft A", "draft B", "combine"], [[], [], [0, 1]]), usage=(50, 20)))
    fake.default("w1", Reply("the combined answer", usage=(10, 3)))
    fake.default("w2", Reply("draft two", usage=(12, 2)))
    config = str(write_config(tmp_path / "c.toml", fake.base_url))
    done = run_stiva("ask", "What is it?", "--config", config, "--json", home=stiva_home)
    assert done.returncode == 0, done.stderr
    (estimate,) = json.loads(done.stdout)["estimates"]
    assert [s["model"] for s in estimate["steps"]] == ["w1", "w2", "w1"] and estimate["kept"] == 3
    assert estimate["cost_usd"] > 0
    assert [s["source"] for s in estimate["steps"]] == ["default", "default", "default"]  # no history yet
    assert estimate["cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in estimate["steps"]))
    # the first ask's answers are the history now: w1's typical answer is its 3 tokens
    again = json.loads(run_stiva("ask", "What is it?", "--config", config, "--json", home=stiva_home).stdout)
    assert [(s["source"], s["completion_tokens"]) for s in again["estimates"][0]["steps"]][0] == ("history", 3)
    asked = (len(fake.requests_for("w1")), len(fake.requests_for("w2")))
    refused = run_stiva("ask", "What is it?", "--config", config, "--budget-usd", "0.00001", home=stiva_home)
    assert refused.returncode == 1 and refused.stdout == ""
    (line,) = [line for line in refused.stderr.splitlines() if line.startswith("stiva:")]
    assert "over the budget of $1e-05" in line and "refused before any call" in line
    assert (len(fake.requests_for("w1")), len(fake.requests_for("w2"))) == asked  # no worker was called
