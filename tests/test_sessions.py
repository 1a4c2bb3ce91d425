"""The session service: every front end's one way to run a question, against real HTTP providers
and a real SQLite history."""

from __future__ import annotations

import json

import pytest

from stiva_tui.config import parse_config
from stiva_tui.core import events as ev
from stiva_tui.core.workflow import Step, Workflow
from stiva_tui.runtime import (
    Ask,
    AskError,
    ConductorMode,
    ConductorVariant,
    DirectMode,
    MoAMode,
    Runtime,
    WorkflowMode,
    column_system,
)
from tests.support.fakeprovider import Reply
from tests.support.pool import lab_config

PLAN_ONE = 'One call.\nmodel_id = [1]\nsubtasks = ["Answer it."]\naccess_list = [[]]'


def config(fake):
    return parse_config(lab_config(fake.base_url, [(name, 1.0, 1.0) for name in ("cond", "w1", "w2", "w3")]))


@pytest.fixture
async def runtime(fake):
    runtime = await Runtime.create(config(fake), discover=False)
    yield runtime
    await runtime.aclose()


async def test_a_question_starts_a_conversation_of_its_sources_kind_and_continues_it(runtime, fake):
    fake.script("cond", Reply(PLAN_ONE), Reply(PLAN_ONE))
    fake.script("w1", Reply("seven"), Reply("forty-two"))
    events: list = []
    first = await runtime.sessions.ask(Ask("Remember 7.", source="tui"), emit=events.append)
    assert first.result.status == "finished" and first.result.answer == "seven"
    started = events[0]
    assert isinstance(started, ev.RunStarted)
    assert started.source == "tui" and started.conversation_id == first.conversation_id
    second = await runtime.sessions.ask(Ask("Times six?", source="tui", conversation_id=first.conversation_id))
    assert second.conversation_id == first.conversation_id
    assert "Remember 7." in json.dumps(fake.requests_for("cond")[1].messages)  # the earlier turn reached it
    conversation = runtime.store.get_conversation(first.conversation_id)
    assert conversation.kind == "chat"
    assert [(m.role, m.content) for m in conversation.messages] == [
        ("user", "Remember 7."),
        ("assistant", "seven"),
        ("user", "Times six?"),
        ("assistant", "forty-two"),
    ]
    assert [m.run_id for m in conversation.messages] == [first.result.run_id] * 2 + [second.result.run_id] * 2


async def test_a_question_without_an_answer_is_left_out_of_what_follows(runtime, fake):
    fake.script("cond", Reply(PLAN_ONE), Reply(PLAN_ONE))
    fake.script("w1", Reply(status=400, error_message="context too long"), Reply("fine"))
    first = await runtime.sessions.ask(Ask("A doomed question", source="cli", options={"max_fallbacks": 0}))
    assert first.result.status == "failed" and first.result.failure == "step"
    await runtime.sessions.ask(Ask("Next", source="cli", conversation_id=first.conversation_id))
    assert "A doomed question" not in json.dumps(fake.requests_for("cond")[1].messages)
    # ... but the history keeps it, with its failed run.
    conversation = runtime.store.get_conversation(first.conversation_id)
    assert conversation.kind == "ask" and conversation.messages[0].content == "A doomed question"
    assert conversation.runs[0].status == "failed" and conversation.runs[0].failure == "step"


async def test_a_question_asked_in_place_of_an_earlier_one_replaces_it_and_the_later_turns(runtime, fake):
    fake.script("cond", *[Reply(PLAN_ONE)] * 4)
    fake.script("w1", Reply("seven"), Reply("forty-two"), Reply("seventy"), Reply("forty-nine"))
    first = await runtime.sessions.ask(Ask("Remember 7.", source="tui"))
    cid = first.conversation_id
    second = await runtime.sessions.ask(Ask("Times six?", source="tui", conversation_id=cid))
    # edit-and-resend of question 0: both turns go, the edited question is asked with nothing before it
    edited = await runtime.sessions.ask(Ask("Remember 70.", source="tui", conversation_id=cid, replaces=0))
    assert edited.conversation_id == cid
    assert "Times six?" not in json.dumps(fake.requests_for("cond")[2].messages)
    # regenerate (question 1 does not exist now: the question is simply added)
    await runtime.sessions.ask(Ask("Times seven?", source="tui", conversation_id=cid, replaces=1))
    conversation = runtime.store.get_conversation(cid)
    assert [(m.role, m.content) for m in conversation.messages] == [
        ("user", "Remember 70."),
        ("assistant", "seventy"),
        ("user", "Times seven?"),
        ("assistant", "forty-nine"),
    ]
    assert first.result.run_id not in {r.run_id for r in conversation.runs}
    assert runtime.store.get_trace(second.result.run_id).conversation_id is None  # kept, unlinked


async def test_in_memory_a_replaced_question_goes_with_its_later_turns(fake):
    runtime = await Runtime.create(config(fake), with_store=False, discover=False)
    try:
        fake.script("cond", *[Reply(PLAN_ONE)] * 3)
        fake.script("w1", Reply("seven"), Reply("forty-two"), Reply("again"))
        first = await runtime.sessions.ask(Ask("Remember 7."))
        await runtime.sessions.ask(Ask("Times six?", conversation_id=first.conversation_id))
        await runtime.sessions.ask(Ask("Times six, again?", conversation_id=first.conversation_id, replaces=1))
        planner = json.dumps(fake.requests_for("cond")[2].messages)
        assert "Remember 7." in planner and "forty-two" not in planner and "Times six?" not in planner
    finally:
        await runtime.aclose()


async def test_requests_that_cannot_run_record_nothing(runtime, fake):
    with pytest.raises(AskError, match="model 'nope' is not available"):
        await runtime.sessions.ask(Ask("Q", mode=DirectMode("nope")))
    with pytest.raises(AskError, match="no conversation missing"):
        await runtime.sessions.ask(Ask("Q", conversation_id="missing"))
    with pytest.raises(AskError, match="unknown conductor preset"):
        runtime.sessions.check(Ask("Q", mode=ConductorMode(preset="huge")))
    assert runtime.store.list_conversations() == [] and runtime.store.list_runs() == []
    assert fake.requests == []


async def test_moa_defaults_to_hosted_proposers_and_never_the_embedded_model(runtime, fake):
    for name in ("cond", "w1", "w2", "w3"):
        fake.default(name, Reply(f"from {name}"))
    outcome = await runtime.sessions.ask(Ask("Q", mode=MoAMode(layers=1)))
    assert outcome.result.status == "finished" and outcome.result.answer == "from cond"  # aggregator: 1st proposer
    trace = runtime.store.get_trace(outcome.result.run_id)
    assert trace.mode == "moa" and trace.system == "moa"
    assert [s.model for s in trace.rounds[0].steps] == ["cond", "w1", "w2", "cond"]
    assert all(s.model != "local/gemma-3-270m" for s in trace.rounds[0].steps)


async def test_a_given_workflow_runs_on_the_named_models(runtime, fake):
    fake.default("w2", Reply("drafted"))
    fake.default("w3", Reply("checked"))
    workflow = Workflow((Step(0, "Draft.", ()), Step(1, "Check the draft.", (0,))))
    outcome = await runtime.sessions.ask(Ask("Q", mode=WorkflowMode(workflow, ("w2", "w3")), source="train"))
    assert outcome.result.answer == "checked"
    trace = runtime.store.get_trace(outcome.result.run_id)
    assert trace.mode == "workflow" and trace.source == "train"
    assert runtime.store.get_conversation(outcome.conversation_id).kind == "train"
    assert fake.requests_for("cond") == []  # nothing planned


async def test_a_conductor_variant_plans_instead_of_the_configured_one(runtime, fake):
    fake.script("w3", Reply(PLAN_ONE))
    fake.default("w1", Reply("answer"))
    variant = ConductorVariant(model="w3")
    outcome = await runtime.sessions.ask(Ask("Q", mode=ConductorMode(variant=variant)))
    assert outcome.result.answer == "answer"
    assert fake.requests_for("cond") == []
    trace = runtime.store.get_trace(outcome.result.run_id)
    assert trace.conductor.model == "w3" and trace.conductor.backend == "remote"


async def test_compare_records_a_session_and_runs_each_column_outside_any_conversation(runtime, fake):
    fake.script("cond", Reply(PLAN_ONE))
    fake.default("w1", Reply("orchestrated"))
    fake.default("w2", Reply("direct"))
    start = runtime.sessions.start_compare("Q?", ["conductor", "w2", "moa"])
    assert start.session_id is not None and start.warning is None
    for system in ("conductor", "w2"):
        events = [
            e
            async for e in runtime.sessions.stream(
                Ask(
                    "Q?",
                    mode=column_system(system, runtime.models).mode,
                    source="tui",
                    in_conversation=False,
                    run_id=start.run_ids[system],
                )
            )
        ]
        assert events[0].run_id == start.run_ids[system] and isinstance(events[-1], ev.RunFinished)
    session = runtime.store.get_compare_session(start.session_id)
    assert [e.system for e in session.entries] == ["conductor", "w2", "moa"]
    assert session.entries[1].trace.answer == "direct" and session.entries[1].trace.system == "direct:w2"
    assert session.entries[2].trace is None  # never run
    assert runtime.store.list_conversations() == []


async def test_a_history_that_cannot_be_written_never_stops_the_run(runtime, fake, monkeypatch):
    import sqlite3

    from stiva_tui.store import StoreError, conversations

    fake.script("cond", Reply(PLAN_ONE), Reply(PLAN_ONE))
    fake.default("w1", Reply("still answered"))

    def disk_error(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    # A write that fails on the writer thread: the run goes on and the failure is shown.
    monkeypatch.setattr(conversations, "_append_message", disk_error)
    events: list = []
    outcome = await runtime.sessions.ask(Ask("Q", source="tui"), emit=events.append)
    assert outcome.result.status == "finished" and outcome.result.answer == "still answered"
    notices = [e for e in events if isinstance(e, ev.SubscriberFailed)]
    assert len(notices) == 1 and notices[0].subscriber == "history" and "disk I/O error" in notices[0].error
    assert isinstance(events[-1], ev.RunFinished)

    # A store that refuses at once (closed): the session says so and the run still answers.
    def closed(*args, **kwargs):
        raise StoreError("the history database is closed")

    monkeypatch.setattr(runtime.store, "start_conversation_later", closed)
    outcome = await runtime.sessions.ask(Ask("Q again", source="cli"))
    assert outcome.result.status == "finished" and outcome.conversation_id is None
    assert any("closed" in w for w in outcome.warnings)


async def test_without_a_history_a_conversation_lives_in_memory(fake):
    runtime = await Runtime.create(config(fake), with_store=False, discover=False)
    try:
        fake.script("cond", Reply(PLAN_ONE), Reply(PLAN_ONE))
        fake.script("w1", Reply("seven"), Reply("forty-two"))
        first = await runtime.sessions.ask(Ask("Remember 7."))
        await runtime.sessions.ask(Ask("Times six?", conversation_id=first.conversation_id))
        planner = json.dumps(fake.requests_for("cond")[1].messages)
        assert "Remember 7." in planner and "seven" in planner
    finally:
        await runtime.aclose()


async def test_presets_bound_the_conductor(runtime, fake):
    fake.script(
        "cond",
        Reply('Two.\nmodel_id = [1, 1, 1]\nsubtasks = ["a", "b", "c"]\naccess_list = [[], [], []]'),
        Reply("still three"),
    )
    outcome = await runtime.sessions.ask(Ask("Q", mode=ConductorMode(preset="conductor-mini")))
    assert "at most 2 steps" in json.dumps(fake.requests_for("cond")[0].messages)
    trace = runtime.store.get_trace(outcome.result.run_id)
    assert trace.system == "conductor-mini"
    # three steps are no plan under the preset: one step on the fallback model answers, saying why
    assert outcome.result.status == "finished" and len(trace.rounds[0].steps) == 1
    assert "the planner wrote no valid plan after 2 tries" in trace.rounds[0].reasoning


def test_conductor_base_is_the_conductor_without_its_adapter():
    from stiva_tui.runtime import ConductorMode, ConductorVariant, column_system

    mode = column_system("conductor:base").mode
    assert mode == ConductorMode(variant=ConductorVariant(base=True)) and mode.system == "conductor:base"
    mini = column_system("conductor-mini:base").mode
    assert mini.preset == "conductor-mini" and mini.system == "conductor-mini:base"
    assert column_system("conductor").mode.system == "conductor"
    assert column_system("llama3:base").mode.system == "direct:llama3:base"  # a pool model's id stays one
