"""The conductor is never worse than asking one model: who plans under `auto`, garbled plans caught
before a worker sees them, the instant plan, the planner's spend counted even when it fails, and
direct:MODEL meaning that model. Against real local HTTP providers."""

from __future__ import annotations

import json

import pytest
from conftest import pool_models

from stiva_tui.conductor.choose import choose_planner, describe_choice, select_conductor
from stiva_tui.conductor.guard import degenerate
from stiva_tui.conductor.remote import RemoteConductor
from stiva_tui.config import ConductorConfig
from stiva_tui.core import events as ev
from stiva_tui.core.workflow import parse_workflow
from stiva_tui.engine.executor import Engine, RunOptions
from stiva_tui.pool.client import HttpWorker
from stiva_tui.pool.embedded import embedded_pool_model
from stiva_tui.pool.types import PoolModel
from tests.support.fakeprovider import Reply


def plan(models, subtasks, access):
    return (
        f"Plan.\nmodel_id = {json.dumps(models)}\nsubtasks = {json.dumps(subtasks)}\naccess_list = {json.dumps(access)}"
    )


def model(id_, price=1.0, planner=False, source="catalog"):
    return PoolModel(id=id_, provider="p", model=id_, price_in=price, price_out=price, planner=planner, source=source)


# --- who plans ---------------------------------------------------------------------------------------


def test_auto_lets_a_pool_model_plan_when_real_models_are_there_and_says_why():
    embedded = embedded_pool_model()
    pool = [
        embedded,
        model("frontier", 10.0),
        model("cheap-planner", 0.3, planner=True),
        model("dear-planner", 5.0, planner=True),
    ]
    config = ConductorConfig()  # auto; this machine has no CUDA GPU
    chosen, why = choose_planner(config, pool)
    assert chosen.id == "cheap-planner" and why == "the cheapest model marked planner"
    conductor, reason = select_conductor(config, pool, HttpWorker())
    assert isinstance(conductor, RemoteConductor) and conductor.model == "cheap-planner"
    assert reason == "remote: no CUDA GPU; cheap-planner plans (the cheapest model marked planner)"
    assert describe_choice(config, pool) == reason
    # the config's model wins; unmarked pools take the first [[models]] entry
    assert choose_planner(ConductorConfig(model="frontier"), pool)[0].id == "frontier"
    unmarked = [embedded, model("found", source="discovered"), model("mine", source="config")]
    assert choose_planner(config, unmarked) == (
        unmarked[2],
        "the first [[models]] entry (mark one planner = true to choose)",
    )
    # only the embedded model: it plans itself
    conductor, reason = select_conductor(config, [embedded], HttpWorker())
    assert conductor.backend == "embedded" and reason.startswith("embedded: no CUDA GPU")


def test_the_catalog_marks_cheap_planners():
    from stiva_tui.catalog import load_catalog

    marked = {m.id for p in load_catalog().providers for m in p.models if m.planner}
    assert {"openai/gpt-5-mini", "anthropic/claude-haiku-4.5", "google/gemini-2.5-flash"} <= marked
    assert "openai/gpt-5" not in marked and "anthropic/claude-opus-4.1" not in marked


def test_stiva_models_names_the_planner(fake, tmp_path, stiva_home):
    from test_cli import write_config

    from tests.support.cli import run_stiva

    config = write_config(tmp_path / "c.toml", fake.base_url)
    config.write_text(
        config.read_text()
        .replace('backend = "remote"\nmodel = "cond"', 'backend = "auto"')
        .replace('id = "w2"', 'id = "w2"\nplanner = true')
    )
    listed = run_stiva("models", "--config", str(config), "--json", home=stiva_home)
    assert listed.returncode == 0, listed.stderr
    assert "w2 plans (marked planner)" in json.dumps(json.loads(listed.stdout))


# --- garbled plans -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "subtask, caught",
    [
        ("Compute 12 times 3.", "copied from the planner's own examples"),
        ("Write a short poem about the sea.", "copied from the planner's own examples"),
        ("", "empty"),
        ("Explain the migration of monarch butterflies.", "shares nothing with the question"),
        ("Add the two numbers.", None),
        ("Name the capital of France.", None),
        ("Answer the question.", None),
        ("Solve it step by step and check the final answer.", None),
    ],
)
def test_degenerate_plans_are_recognised(subtask, caught):
    workflow = parse_workflow(plan([0], [subtask], [[]]), 1, 5, allow_empty=True) if subtask else None
    if workflow is None:
        from stiva_tui.core.workflow import Step, Workflow

        workflow = Workflow((Step(0, "", ()),))
    why = degenerate(workflow, "What is the capital of France?")
    assert (why is None) if caught is None else (caught in why)


def test_an_example_subtask_is_fine_for_its_own_question():
    workflow = parse_workflow(plan([0], ["Compute 12 times 3."], [[]]), 1, 5)
    assert degenerate(workflow, "What is 12 times 3?") is None


async def test_a_copied_example_subtask_never_reaches_a_worker_and_the_answer_comes_from_the_question(fake):
    fake.script("cond", Reply(plan([1], ["Compute 12 times 3."], [[]]), usage=(40, 10)))
    fake.default("cheap", Reply("wrong model"))
    fake.default("strong", lambda request: Reply("Paris" if "capital of France" in request.user_text else "36"))
    models = pool_models(fake, "cond", "cheap", "strong")
    models = [models[0], models[1], PoolModel(**{**models[2].__dict__, "price_in": 5.0, "price_out": 20.0})]
    worker = HttpWorker(retries=0)
    events: list = []
    try:
        # a planner whose plans are guarded (the embedded one, or one whose plans were replaced recently)
        result = await Engine(models, worker, RemoteConductor(models[0], worker), guard_plans=True).run(
            "What is the capital of France?", emit=events.append
        )
    finally:
        await worker.aclose()
    assert result.status == "finished" and result.answer == "Paris"
    (ready,) = [e for e in events if isinstance(e, ev.WorkflowReady)]
    assert ready.note.startswith("plan replaced by one step on strong: step 1's subtask is copied")
    assert [s.model for s in ready.workflow.steps] == [2] and "[Stiva: plan replaced" in ready.reasoning
    assert not fake.requests_for("cheap")
    (asked,) = fake.requests_for("strong")
    assert asked.messages == [{"role": "user", "content": "What is the capital of France?"}]  # the question itself


async def test_a_one_step_plan_sends_the_question_itself_with_the_subtask_as_guidance(fake):
    fake.script("cond", Reply(plan([1], ["Name the capital of France, one word."], [[]])))
    fake.default("w", Reply("Paris"))
    models = pool_models(fake, "cond", "w")
    worker = HttpWorker(retries=0)
    try:
        await Engine(models, worker, RemoteConductor(models[0], worker)).run(
            "What is the capital of France?",
            conversation=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
        )
    finally:
        await worker.aclose()
    (asked,) = fake.requests_for("w")
    assert asked.messages[:2] == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    assert asked.messages[2]["content"] == (
        "What is the capital of France?\n\n(A note from the planner, as "
        "guidance only: Name the capital of France, one word.)"
    )


# --- the instant plan --------------------------------------------------------------------------------


async def test_one_model_and_a_short_question_plan_instantly(fake):
    fake.default("only", Reply("Paris"))
    (only,) = pool_models(fake, "only")
    conductor_model = pool_models(fake, "cond")[0]
    worker = HttpWorker(retries=0)
    events: list = []
    try:
        result = await Engine([only], worker, RemoteConductor(conductor_model, worker)).run(
            "What is the capital of France?", emit=events.append
        )
        follow_up = await Engine([only], worker, RemoteConductor(conductor_model, worker)).run(
            "And of Spain?",
            emit=events.append,
            conversation=[
                {"role": "user", "content": "What is the capital of France?"},
                {"role": "assistant", "content": "Paris"},
            ],
        )
        long = await Engine([only], worker, RemoteConductor(conductor_model, worker)).run(
            "Explain, in two parts, why the sky is blue and why sunsets are red, with the physics of each "
            "and an everyday example."
        )
    finally:
        await worker.aclose()
    assert result.answer == "Paris"
    # the follow-up in a conversation too: its worker reads the earlier turns itself
    assert follow_up.status == "finished"
    assert any(
        "capital of France" in str(r.body["messages"]) and "And of Spain?" in str(r.body["messages"])
        for r in fake.requests_for("only")
    )
    ready = [e for e in events if isinstance(e, ev.WorkflowReady)]
    assert len(ready) == 2
    assert all(r.note == "one model in the pool: one step" and r.latency_s == 0.0 for r in ready)
    planned = [r.user_text for r in fake.requests_for("cond")]
    assert planned and all(
        "capital of France" not in text and "Spain" not in text for text in planned
    )  # only the long one
    assert all("sky is blue" in text for text in planned[:1]) and long.run_id


# --- the planner's spend -----------------------------------------------------------------------------


async def test_a_planner_that_keeps_failing_is_paid_for_in_the_totals_and_the_budget(fake, tmp_path, stiva_home):
    fake.script("cond", Reply("no plan here", usage=(100, 20)), Reply("still none", usage=(130, 25)))
    models = pool_models(fake, "cond", "w")  # prices 1.0 in, 2.0 out per 1M
    worker = HttpWorker(retries=0)
    try:
        result = await Engine(models, worker, RemoteConductor(models[0], worker)).run(
            "Explain the difference between a list and a tuple in Python, with examples of each use."
        )
        budgeted = await Engine(models, worker, RemoteConductor(models[0], worker)).run(
            "Explain the difference between a list and a tuple in Python, with examples of each use.",
            options=RunOptions(budget_tokens=10),
        )
    finally:
        await worker.aclose()
    # no plan: the question is answered in one step on the fallback model (engine/fallback.py), and
    # the planner's failed attempts are in the totals beside that step
    assert result.status == "finished" and result.answer
    t = result.totals
    assert t.conductor_tokens == 275 and t.conductor_cost_usd == pytest.approx((230 * 1.0 + 45 * 2.0) / 1e6)
    assert t.prompt_tokens > 230 and t.completion_tokens > 45 and t.cost_usd > t.conductor_cost_usd
    assert budgeted.status == "failed" and budgeted.failure == "budget"  # the attempts spent the budget


# --- fallbacks ---------------------------------------------------------------------------------------


async def test_fallbacks_empty_means_none_and_unset_means_the_other_models(fake):
    fake.default("w1", Reply(status=500))
    fake.default("w2", Reply("from w2"))
    models = pool_models(fake, "w1", "w2")
    worker = HttpWorker(retries=0)
    from stiva_tui.engine.baselines import direct_workflow

    try:
        none = await Engine(models, worker).run_workflow(
            "Q", direct_workflow(), [models[0]], options=RunOptions(fallbacks=())
        )
        others = await Engine(models, worker).run_workflow(
            "Q", direct_workflow(), [models[0]], options=RunOptions(fallbacks=None)
        )
    finally:
        await worker.aclose()
    assert none.status == "failed" and others.answer == "from w2"


def test_the_config_tells_no_fallback_from_the_default():
    from stiva_tui.config import parse_config

    assert parse_config({}).workers.fallbacks is None
    assert parse_config({"workers": {"fallbacks": []}}).workers.fallbacks == []
