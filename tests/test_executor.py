"""The executor against real local HTTP providers: concurrency, visibility, accounting, faults."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from conftest import pool_models

from stiva_tui.conductor.remote import RemoteConductor
from stiva_tui.core import events as ev
from stiva_tui.engine.baselines import moa_workflow
from stiva_tui.engine.executor import Engine, RunOptions
from stiva_tui.engine.fallback import FallbackEvidence
from stiva_tui.pool.client import HttpWorker
from tests.support.fakeprovider import Reply


def plan(models, subtasks, access):
    import json

    return (
        f"Plan.\nmodel_id = {json.dumps(models)}\nsubtasks = {json.dumps(subtasks)}\naccess_list = {json.dumps(access)}"
    )


def make_engine(fake, *names, retries=1, worker=None):
    models = pool_models(fake, "cond", *names)
    worker = worker or HttpWorker(retries=0)
    return Engine(models, worker, RemoteConductor(models[0], worker)), worker


async def test_fan_in_runs_branches_concurrently(fake):
    fake.script("cond", Reply(plan([1, 2, 1], ["draft A", "draft B", "combine"], [[], [], [0, 1]])))
    # Each branch's provider holds its answer until the other branch has asked too: branches run one
    # at a time never meet (the first waits out the barrier and answers "alone"). No clock involved.
    both_asked = threading.Barrier(2)

    def branch(text):
        def reply(request):
            if request.user_text.split("Your assigned subtask: ")[1].startswith("combine"):
                return Reply("final")
            try:
                both_asked.wait(timeout=10)
            except threading.BrokenBarrierError:
                return Reply("alone")
            return Reply(text)

        return reply

    fake.default("w1", branch("alpha"))
    fake.default("w2", branch("beta"))
    engine, worker = make_engine(fake, "w1", "w2")
    events: list = []
    result = await engine.run("Q?", emit=events.append)
    await worker.aclose()
    assert result.status == "finished" and result.answer == "final"
    combine = [r.user_text for r in fake.requests_for("w1") if "Your assigned subtask: combine" in r.user_text]
    assert len(combine) == 1 and "alpha" in combine[0] and "beta" in combine[0], combine
    assert "alone" not in combine[0]  # both branches were in flight at once
    starts = {e.index: e for e in events if isinstance(e, ev.StepStarted)}
    finishes = {e.index: e for e in events if isinstance(e, ev.StepFinished)}
    assert events.index(starts[2]) > max(events.index(finishes[0]), events.index(finishes[1]))


async def test_each_worker_sees_exactly_its_access_list(fake):
    fake.script("cond", Reply(plan([1, 1, 1, 1], ["s0", "s1", "s2", "s3"], [[], [0], [], [0, 2]])))
    outputs = iter(["OUT0", "OUT1", "OUT2", "OUT3"])
    fake.default(
        "w1",
        lambda request: Reply(request.user_text.split("Your assigned subtask: ")[1].upper() + " " + next(outputs, "x")),
    )
    engine, worker = make_engine(fake, "w1")
    result = await engine.run("The question", emit=None)
    await worker.aclose()
    seen = {r.user_text.split("Your assigned subtask: ")[1]: r.user_text for r in fake.requests_for("w1")}
    assert "The question" in seen["s0"] and "<step_" not in seen["s0"]
    assert "<step_0_response>" in seen["s1"] and "S0" in seen["s1"] and "step_2" not in seen["s1"]
    assert "<step_" not in seen["s2"]
    assert "<step_0_subtask>\ns0" in seen["s3"] and "<step_2_response>" in seen["s3"]
    assert "<step_1_" not in seen["s3"]
    assert result.answer.startswith("S3")  # the answer is the last step's output


async def test_totals_equal_what_the_servers_reported(fake):
    fake.script("cond", Reply(plan([1, 2], ["a", "b"], [[], [0]]), usage=(100, 20)))
    fake.script("w1", Reply("one", usage=(11, 3)))
    fake.script("w2", Reply("two", usage=(17, 5)))
    models = pool_models(fake, "cond", "w1", "w2", price_in=2.0, price_out=10.0)
    worker = HttpWorker()
    engine = Engine(models, worker, RemoteConductor(models[0], worker))
    events: list = []
    result = await engine.run("Q", emit=events.append)
    await worker.aclose()
    assert (result.totals.prompt_tokens, result.totals.completion_tokens) == (128, 28)
    expected_cost = (128 * 2.0 + 28 * 10.0) / 1e6
    assert result.totals.cost_usd == pytest.approx(expected_cost)
    finished = [e for e in events if isinstance(e, ev.StepFinished)]
    assert sum(e.cost_usd for e in finished) == pytest.approx((28 * 2.0 + 8 * 10.0) / 1e6)
    assert isinstance(events[-1], ev.RunFinished) and events[-1].totals == result.totals


async def test_a_failing_step_is_retried_then_moved_to_a_fallback(fake):
    fake.script("cond", Reply(plan([1], ["answer"], [[]])))
    fake.script("w1", Reply("partial text that breaks", fault="cut"))  # keeps failing
    fake.script("w2", Reply("rescued", usage=(5, 1)))
    engine, worker = make_engine(fake, "w1", "w2")
    events: list = []
    result = await engine.run("Q", emit=events.append, options=RunOptions(retries=1, fallbacks=("w2",)))
    await worker.aclose()
    assert result.status == "finished" and result.answer == "rescued"
    failed = [e for e in events if isinstance(e, ev.StepFailed)]
    assert [(e.model, e.attempt, e.fallback) for e in failed] == [("w1", 1, "w1"), ("w1", 2, "w2")]
    done = [e for e in events if isinstance(e, ev.StepFinished)][0]
    assert done.model == "w2" and done.attempts == 3


async def test_when_no_fallback_works_the_run_fails_naming_step_and_provider(fake):
    fake.script("cond", Reply(plan([1, 1], ["a", "b"], [[], [0]])), Reply(status=503, error_message="down"))
    fake.script("w1", Reply("ok"), Reply(status=400, error_message="context length exceeded"))
    models = pool_models(fake, "cond", "w1")
    worker = HttpWorker(retries=0)
    engine = Engine(models, worker, RemoteConductor(models[0], worker))
    events: list = []
    result = await engine.run(
        "Q", emit=events.append, options=RunOptions(retries=0, fallbacks=("cond",), max_fallbacks=1)
    )
    await worker.aclose()
    assert result.status == "failed"
    assert "step 2" in result.error and "cond" in result.error and "down" in result.error  # numbered from 1
    failed = [e for e in events if isinstance(e, ev.StepFailed)]
    assert [(e.model, e.fallback) for e in failed] == [("w1", "cond"), ("cond", None)]
    assert "context length exceeded" in failed[0].error
    assert isinstance(events[-1], ev.RunFailed)


async def test_budget_cap_stops_the_run_cleanly(fake):
    fake.script("cond", Reply(plan([1, 1, 1], ["a", "b", "c"], [[], [0], [1]]), usage=(10, 10)))
    fake.default("w1", Reply("x", usage=(1000, 1000)))
    models = pool_models(fake, "cond", "w1", price_in=1.0, price_out=1.0)
    worker = HttpWorker()
    engine = Engine(models, worker, RemoteConductor(models[0], worker))
    events: list = []
    result = await engine.run("Q", emit=events.append, options=RunOptions(budget_tokens=2500))
    await worker.aclose()
    assert result.status == "failed" and "budget" in result.error
    # 20 + 2000 < 2500 lets step 1 start; it crosses the cap, so step 2 never runs.
    assert len(fake.requests_for("w1")) == 2
    assert result.totals.prompt_tokens + result.totals.completion_tokens == 4020
    assert isinstance(events[-1], ev.RunFailed)


async def test_usd_budget(fake):
    fake.script("cond", Reply(plan([1, 1], ["a", "b"], [[], [0]]), usage=(10, 10)))
    fake.default("w1", Reply("x", usage=(1_000_000, 0)))
    models = pool_models(fake, "cond", "w1", price_in=1.0, price_out=1.0)
    worker = HttpWorker()
    engine = Engine(models, worker, RemoteConductor(models[0], worker))
    result = await engine.run("Q", options=RunOptions(budget_usd=0.5))
    await worker.aclose()
    assert result.status == "failed" and "$0.5" in result.error


async def test_cancellation_leaves_no_task_or_connection(fake):
    fake.script("cond", Reply(plan([1, 2], ["a", "b"], [[], []])))
    fake.default("w1", Reply("slow " * 20, chunk_delay_s=0.2))
    fake.default("w2", Reply(fault="hang"))
    engine, worker = make_engine(fake, "w1", "w2")
    events: list = []
    before = set(asyncio.all_tasks())
    task = asyncio.create_task(engine.run("Q", emit=events.append))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if fake.active == 2:
            break
    assert fake.active == 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert isinstance(events[-1], ev.RunCancelled)
    assert set(asyncio.all_tasks()) - before == set()
    assert await asyncio.to_thread(fake.wait_idle, 3.0)
    await worker.aclose()


async def test_second_round_sees_previous_workflow_and_may_keep_the_answer(fake):
    fake.script(
        "cond",
        Reply(plan([1], ["first try"], [[]])),
        Reply("Looks right.\nmodel_id = []\nsubtasks = []\naccess_list = []"),
    )
    fake.script("w1", Reply("answer one"))
    engine, worker = make_engine(fake, "w1")
    events: list = []
    result = await engine.run("Q", emit=events.append, options=RunOptions(rounds=3))
    await worker.aclose()
    assert result.answer == "answer one"
    second = fake.requests_for("cond")[1].user_text
    assert "Previous plan:" in second and "first try" in second and "answer one" in second
    ready = [e for e in events if isinstance(e, ev.WorkflowReady)]
    assert [r.keep_previous for r in ready] == [False, True]  # stopped: no third round
    assert len(fake.requests_for("cond")) == 2


async def test_second_round_may_replace_the_answer(fake):
    fake.script("cond", Reply(plan([1], ["first"], [[]])), Reply(plan([1], ["better"], [[]])))
    fake.script("w1", Reply("answer one"), Reply("answer two"))
    engine, worker = make_engine(fake, "w1")
    result = await engine.run("Q", options=RunOptions(rounds=2))
    await worker.aclose()
    assert result.answer == "answer two"


async def test_conductor_gets_one_repair_retry(fake):
    fake.script(
        "cond", Reply('model_id = [7]\nsubtasks = ["a"]\naccess_list = [[]]'), Reply(plan([1], ["fixed"], [[]]))
    )
    engine, worker = make_engine(fake, "w1")
    result = await engine.run("Q")
    assert result.status == "finished"
    repair = fake.requests_for("cond")[1].messages[-1]["content"]
    assert "could not be read" in repair and "model_id[0] is 7" in repair
    fake.script("cond", Reply("no plan at all"))
    events: list = []
    result = await engine.run("Q", emit=events.append)
    await worker.aclose()
    # no plan after the repair: the question is answered in one step on the fallback model, saying why
    (ready,) = [e for e in events if isinstance(e, ev.WorkflowReady)]
    assert result.status == "finished" and "the planner wrote no valid plan after 2 tries" in ready.note


async def test_direct_baseline_counts_like_any_step(fake):
    fake.script("w2", Reply("direct answer", usage=(9, 2)))
    engine, worker = make_engine(fake, "w1", "w2")
    events: list = []
    result = await engine.run_direct("Q", "w2", emit=events.append)
    await worker.aclose()
    assert result.answer == "direct answer"
    assert (result.totals.prompt_tokens, result.totals.completion_tokens) == (9, 2)
    assert events[0].mode == "direct"
    assert [type(e).__name__ for e in events if not isinstance(e, ev.StepDelta)] == [
        "RunStarted",
        "RoundStarted",
        "WorkflowReady",
        "PlanEstimated",  # priced before the call
        "StepStarted",
        "StepFinished",
        "RunFinished",
    ]


async def test_mixture_of_agents_layers_then_aggregator(fake):
    fake.default("w1", Reply("p1", usage=(1, 1)))
    fake.default("w2", Reply("p2", usage=(1, 1)))
    fake.default("cond", Reply("aggregated", usage=(1, 1)))
    engine, worker = make_engine(fake, "w1", "w2")
    result = await engine.run_moa("Q", ["w1", "w2"], "cond", layers=2)
    await worker.aclose()
    assert result.answer == "aggregated"
    assert len(fake.requests) == 5 and result.totals.prompt_tokens == 5
    layer2 = fake.requests_for("w1")[1].user_text
    assert "<step_0_response>" in layer2 and "<step_1_response>" in layer2
    agg = fake.requests_for("cond")[0].user_text
    assert "<step_2_response>" in agg and "<step_3_response>" in agg and "<step_0_" not in agg
    wf = moa_workflow(3, 1)
    assert [s.access for s in wf.steps] == [(), (), (), (0, 1, 2)]


async def test_stream_yields_every_event_in_order(fake):
    fake.script("cond", Reply(plan([1], ["a"], [[]])))
    engine, worker = make_engine(fake, "w1")
    kinds = [type(e).__name__ async for e in engine.stream("run", "Q")]
    await worker.aclose()
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished" and "ConductorDelta" in kinds


async def test_an_unexpected_worker_exception_is_a_step_failure_not_a_crash(fake):
    from stiva_tui.pool.client import PoolWorker

    class Flaky(PoolWorker):
        def stream_chat(self, model, messages, **kwargs):
            if model.id == "w1":
                raise RuntimeError("embedded model exploded")
            return super().stream_chat(model, messages, **kwargs)

    fake.script("cond", Reply(plan([1], ["a"], [[]])))
    fake.default("w2", Reply("saved by w2"))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = Flaky(HttpWorker())
    engine = Engine(models, worker, RemoteConductor(models[0], worker))
    events: list = []
    result = await engine.run("Q", emit=events.append, options=RunOptions(retries=0, fallbacks=("w2",)))
    await worker.aclose()
    assert result.answer == "saved by w2"
    failed = next(e for e in events if isinstance(e, ev.StepFailed))
    assert "RuntimeError: embedded model exploded" in failed.error and failed.fallback == "w2"


def test_default_fallbacks_skip_the_embedded_model(fake):
    from dataclasses import replace

    from stiva_tui.core.workflow import Step
    from stiva_tui.engine.executor import _Run

    models = pool_models(fake, "w1", "w2")
    embedded = replace(models[0], id="local/gemma-3-270m", kind="embedded")
    engine = Engine([models[0], embedded, models[1]], HttpWorker())
    run = _Run(engine, "Q", None, RunOptions(retries=1), None, ())
    assert [m.id for m in run._candidates(Step(0, "a", ()), engine.models)] == ["w1", "w2"]
    run = _Run(engine, "Q", None, RunOptions(retries=0, fallbacks=("local/gemma-3-270m",)), None, ())
    assert [m.id for m in run._candidates(Step(0, "a", ()), engine.models)] == ["w1", "local/gemma-3-270m"]


async def test_stop_sequences_go_upstream_with_the_answering_step_only(fake):
    fake.script("cond", Reply(plan([1, 1], ["draft", "answer"], [[], [0]])))
    engine, worker = make_engine(fake, "w1")
    result = await engine.run("Q", options=RunOptions(stop=("\n\nEND",)))
    await worker.aclose()
    assert result.status == "finished"
    draft, answer = fake.requests_for("w1")
    assert "stop" not in draft.body and answer.body["stop"] == ["\n\nEND"]


async def test_a_failure_before_any_text_is_not_retried_twice(fake):
    # The client already retried the 500 (retries=1: two calls); the step moves on to its fallback
    # instead of running the client's retries again.
    fake.script("cond", Reply(plan([1], ["answer"], [[]])))
    fake.default("w1", Reply(status=500, error_message="down"))
    fake.default("w2", Reply("from w2"))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker(retries=1, backoff_s=0.01)
    engine = Engine(models, worker, RemoteConductor(models[0], worker))
    events: list = []
    result = await engine.run("Q", emit=events.append, options=RunOptions(retries=1, fallbacks=("w2",)))
    await worker.aclose()
    assert result.answer == "from w2"
    assert len(fake.requests_for("w1")) == 2
    failed = [e for e in events if isinstance(e, ev.StepFailed)]
    assert [(e.model, e.fallback) for e in failed] == [("w1", "w2")]


# --- subscribers, typed failures, the answer step, given workflows --------------------------------


async def test_a_failing_subscriber_is_reported_once_and_never_stops_the_run(fake, caplog):
    fake.script("cond", Reply(plan([1], ["answer"], [[]])))
    fake.script("w1", Reply("the answer"))
    models = pool_models(fake, "cond", "w1")
    worker = HttpWorker(retries=0)
    calls = []

    def broken(event):
        calls.append(event)
        raise OSError("disk full")

    broken.name = "history"
    seen: list = []
    engine = Engine(models, worker, RemoteConductor(models[0], worker), subscribers=[broken])
    result = await engine.run("Q?", emit=seen.append)
    await worker.aclose()
    assert result.status == "finished" and result.answer == "the answer"
    notices = [e for e in seen if isinstance(e, ev.SubscriberFailed)]
    assert len(notices) == 1 and notices[0].subscriber == "history" and "OSError: disk full" in notices[0].error
    assert len(calls) == sum(1 for e in seen if not isinstance(e, ev.SubscriberFailed))  # it kept being called
    assert isinstance(seen[-1], ev.RunFinished)
    assert "subscriber history failed" in caplog.text


async def test_failures_carry_a_typed_reason(fake):
    fake.script("cond", Reply("no lists here"), Reply("still none"))
    engine, worker = make_engine(fake, "w1")
    events: list = []
    result = await engine.run("Q?", emit=events.append)
    # a planner that writes no plan fails no run: one step on the fallback model answers instead
    assert result.status == "finished" and result.failure is None and isinstance(events[-1], ev.RunFinished)

    fake.script("cond", Reply(plan([1], ["a"], [[]])))
    fake.script("w1", *[Reply(status=400, error_message="bad request")] * 3)
    engine = Engine(pool_models(fake, "cond", "w1"), worker, RemoteConductor(pool_models(fake, "cond")[0], worker))
    result = await engine.run("Q?", options=RunOptions(fallbacks=("cond",), max_fallbacks=0))
    assert result.status == "failed" and result.failure == "step"

    fake.script("cond", Reply(plan([1], ["a"], [[]]), usage=(10, 10)))
    result = await engine.run("Q?", options=RunOptions(budget_tokens=5))
    await worker.aclose()
    assert result.failure == "budget"


async def test_the_answer_step_is_marked_on_the_events(fake):
    fake.script("cond", Reply(plan([1, 1], ["draft", "final"], [[], [0]])), Reply(plan([1], ["again"], [[]])))
    fake.default("w1", lambda request: Reply("text"))
    engine, worker = make_engine(fake, "w1")
    events: list = []
    await engine.run("Q?", emit=events.append, options=RunOptions(rounds=2))
    await worker.aclose()
    marks = {(e.round, e.index): (e.writes_answer, e.final) for e in events if isinstance(e, ev.StepStarted)}
    # Round 1's last step writes that round's answer, but round 2 may replace it: not final.
    assert marks == {(1, 0): (False, False), (1, 1): (True, False), (2, 0): (True, True)}


async def test_a_given_workflow_runs_without_planning(fake):
    from stiva_tui.core.workflow import Step, Workflow

    fake.script("w1", Reply("one"))
    fake.script("w2", Reply("two"))
    models = pool_models(fake, "w1", "w2")
    worker = HttpWorker(retries=0)
    engine = Engine(models, worker, source="train")
    events: list = []
    workflow = Workflow((Step(0, "first", ()), Step(1, "second", (0,))))
    result = await engine.run_workflow("Q?", workflow, [models[1], models[0]], emit=events.append)
    await worker.aclose()
    assert result.status == "finished" and result.answer == "one"  # step 1 ran on model index 1 = w1
    started = events[0]
    assert isinstance(started, ev.RunStarted) and started.mode == "workflow" and started.source == "train"
    assert [e.model for e in events if isinstance(e, ev.StepStarted)] == ["w2", "w1"]
    assert "<step_0_response>\ntwo" in fake.requests_for("w1")[0].user_text


async def test_the_answer_is_cut_at_a_stop_sequence_a_provider_ignored(fake):
    fake.script("w1", Reply("The answer. END and more"))
    models = pool_models(fake, "w1")
    worker = HttpWorker(retries=0)
    engine = Engine(models, worker)
    result = await engine.run_direct("Q?", "w1", options=RunOptions(stop=("END",)))
    await worker.aclose()
    assert result.answer == "The answer. "


async def test_a_call_past_its_deadline_fails_like_any_other(fake):
    """A provider that keeps the stream alive with comments but never answers: the idle timeout
    never fires, the deadline does, and the step moves to its fallback.

    The deadline holds every call of the run, the fallback's too, so it is set far above what an
    answer takes (milliseconds; at 0.6 s the fallback itself missed it on a loaded machine): the
    test's length is then the deadline, however slow the machine. Without working deadlines the
    kept-alive call never ends, and the outer limit fails the test instead of hanging it."""
    deadline_s = 3.0
    fake.default("w1", Reply(fault="keepalive"))
    fake.default("w2", Reply("in time"))
    models = pool_models(fake, "w1", "w2")
    worker = HttpWorker(retries=0, timeout_s=30)
    engine = Engine(models, worker)
    events: list = []
    started = time.monotonic()
    try:
        async with asyncio.timeout(deadline_s + 20):  # without a deadline the call would never end
            result = await engine.run_direct("Q?", "w1", emit=events.append, options=RunOptions(deadline_s=deadline_s))
    finally:
        await worker.aclose()
    assert result.status == "finished" and result.answer == "in time"
    assert time.monotonic() - started >= deadline_s  # w1 was given its whole deadline, not cut short
    (failed,) = [e for e in events if isinstance(e, ev.StepFailed)]
    assert failed.model == "w1" and "no complete reply within 3 s" in failed.error and failed.fallback == "w2"
    assert fake.wait_idle(5)  # the kept-alive call was closed


async def test_a_remote_conductor_asks_again_when_its_reply_breaks_off(fake):
    plan_text = plan([1], ["answer it"], [[]])
    fake.script("cond", Reply(plan_text, fault="cut"), Reply(plan_text))
    fake.default("w1", Reply("done"))
    models = pool_models(fake, "cond", "w1")
    worker = HttpWorker(retries=0)
    engine = Engine(models, worker, RemoteConductor(models[0], worker))
    events: list = []
    result = await engine.run("Q?", emit=events.append)
    assert result.status == "finished" and result.answer == "done"
    assert len(fake.requests_for("cond")) == 2
    assert any("broke off" in e.text for e in events if isinstance(e, ev.ConductorDelta))

    fake.default("cond", Reply(fault="keepalive"))  # ... and its calls have a deadline too
    engine = Engine(
        models, worker, RemoteConductor(models[0], worker, deadline_s=0.5), fallback=FallbackEvidence(model="w1")
    )
    events = []
    result = await engine.run("Q?", emit=events.append)
    await worker.aclose()
    # past it, the question is answered in one step on the fallback model, and the plan's line says why
    (ready,) = [e for e in events if isinstance(e, ev.WorkflowReady)]
    assert result.status == "finished" and result.answer == "done"
    assert ready.note.startswith("plan replaced by one step on w1: the planner failed: ")
    assert "no complete reply within 0.5 s" in ready.note
