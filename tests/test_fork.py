"""Forking a finished run at one step (engine/fork.py, Sessions.fork): only the forked step and the
steps that read it are called again, against real HTTP providers on 127.0.0.1 and a real SQLite
history; the branch is kept under its run, shown and exported with it, and voted on like any
compare column."""

from __future__ import annotations

import asyncio
import json

import pytest

from stiva_tui.config import parse_config
from stiva_tui.core import events as ev
from stiva_tui.core.trace import Trace
from stiva_tui.core.workflow import Step, Workflow
from stiva_tui.engine.fork import ForkError, parse_step, readers
from stiva_tui.runtime import Ask, AskError, Fork, Runtime
from stiva_tui.store import NotFoundError
from stiva_tui.store.export import conversation_json, conversation_markdown, run_markdown
from stiva_tui.train.votes import read_votes
from tests.support.fakeprovider import Reply
from tests.support.pool import lab_config

# Steps 1 and 2 draft apart, step 3 checks step 1, step 4 combines steps 2 and 3 (the answer).
PLAN = (
    "Draft, check, combine.\n"
    "model_id = [1, 2, 3, 1]\n"
    'subtasks = ["Draft A.", "Draft B.", "Check A.", "Combine B and the check."]\n'
    "access_list = [[], [], [0], [1, 2]]"
)
MODELS = ("cond", "w1", "w2", "w3")


def config(fake):
    return parse_config(lab_config(fake.base_url, [(name, 1.0, 2.0) for name in MODELS]))


@pytest.fixture
async def runtime(fake):
    runtime = await Runtime.create(config(fake), discover=False)
    yield runtime
    await runtime.aclose()


def counts(fake) -> dict[str, int]:
    return {m: len(fake.requests_for(m)) for m in MODELS}


async def asked(runtime, fake) -> Trace:
    """A finished four-step run, as the history keeps it."""
    fake.script("cond", Reply(PLAN, usage=(50, 40)))
    fake.script("w1", Reply("draft A", usage=(10, 2)), Reply("combined: B and A checked", usage=(30, 5)))
    fake.script("w2", Reply("draft B from w2", usage=(10, 4)))
    fake.script("w3", Reply("A checked", usage=(20, 2)))
    outcome = await runtime.sessions.ask(Ask("Write it.", source="cli"))
    assert outcome.result.status == "finished", outcome.result.error
    runtime.store.wait_for_writes()
    return runtime.store.get_trace(outcome.result.run_id)


def without_branches(trace: Trace) -> dict:
    return trace.model_dump(exclude={"branches"})


async def test_a_fork_calls_only_the_forked_step_and_its_readers_and_its_totals_are_what_it_called(runtime, fake):
    original = await asked(runtime, fake)
    before = counts(fake)
    fake.script("w3", Reply("draft B from w3", usage=(100, 10)))
    fake.script("w1", Reply("combined again", usage=(200, 20)))
    events: list = []
    outcome = await runtime.sessions.fork(Fork(original.run_id[:8], "2", "w3"), emit=events.append)
    result = outcome.result
    assert result.status == "finished" and result.answer == "combined again"
    # Server side: step 2 on w3 and step 4 (which reads it) on w1; nothing else, no plan.
    after = counts(fake)
    assert {m: after[m] - before[m] for m in MODELS} == {"cond": 0, "w1": 1, "w2": 0, "w3": 1}
    combine = fake.requests_for("w1")[-1].user_text
    assert "draft B from w3" in combine and "A checked" in combine and "draft B from w2" not in combine
    # What it added is what was called: 300 in, 30 out, at $1 and $2 per million.
    assert (result.totals.prompt_tokens, result.totals.completion_tokens) == (300, 30)
    assert result.totals.cost_usd == pytest.approx((300 * 1.0 + 30 * 2.0) / 1e6)
    started = [e for e in events if isinstance(e, ev.StepStarted)]
    assert [(e.index, e.model) for e in started] == [(1, "w3"), (3, "w1")]
    assert events[0].fork == ev.ForkOrigin(original.run_id, 1, 1, "w3", "Draft B.", 1)

    runtime.store.wait_for_writes()
    trace = runtime.store.get_trace(original.run_id)
    assert without_branches(trace) == without_branches(original)  # the original is untouched
    (branch,) = trace.branches
    assert branch.run_id == result.run_id and branch.system == "branch:1" and branch.fork is not None
    assert (branch.fork.of, branch.fork.index, branch.fork.model, branch.fork.branch) == (original.run_id, 1, "w3", 1)
    steps = branch.rounds[0].steps
    assert [s.kept for s in steps] == [True, False, True, False]
    assert [s.model for s in steps] == ["w1", "w3", "w3", "w1"]
    assert [s.output for s in steps if s.kept] == ["draft A", "A checked"]
    assert sum(s.cost_usd for s in steps) == pytest.approx(branch.totals.cost_usd)
    assert sum(s.usage.prompt_tokens for s in steps) == branch.totals.prompt_tokens == 300
    # The history's list shows the run once; the branch is under it.
    assert [r.run_id for r in runtime.store.list_runs()] == [original.run_id]
    assert runtime.store.get_trace(result.run_id).fork.of == original.run_id


async def test_a_second_fork_is_branch_2_and_both_show_in_history_and_exports(runtime, fake):
    original = await asked(runtime, fake)
    fake.script("w3", Reply("draft B from w3"))
    fake.script("w1", Reply("answer of branch one"))
    first = await runtime.sessions.fork(Fork(original.run_id, "2", "w3"))
    fake.script("w2", Reply("a better draft A"))
    fake.script("w3", Reply("better A checked"))
    fake.script("w1", Reply("answer of branch two"))
    second = await runtime.sessions.fork(Fork(original.run_id, "1", "w2", subtask="Draft A, briefly."))
    assert (first.branch, second.branch) == (1, 2)
    # Step 1 is read by step 3, which step 4 reads: all three again, and step 2 kept.
    assert second.plan.rerun == frozenset({0, 2, 3}) and set(second.plan.kept) == {1}
    assert "Draft A, briefly." in fake.requests_for("w2")[-1].user_text
    assert "a better draft A" in fake.requests_for("w3")[-1].user_text
    runtime.store.wait_for_writes()
    trace = runtime.store.get_trace(original.run_id)
    assert [b.fork.branch for b in trace.branches] == [1, 2]

    text = run_markdown(trace, plan=True)
    assert "combined: B and A checked" in text  # the original's answer
    assert "### Branch 1: step 2 on `w3`" in text and "answer of branch one" in text
    assert "### Branch 2: step 1 on `w2`" in text and "answer of branch two" in text
    assert "_Subtask:_ Draft A, briefly." in text
    assert "and steps 3,4 that read it; kept: step 2" in text
    exported = json.dumps(conversation_json(runtime.store, original.conversation_id))
    assert "answer of branch one" in exported and "answer of branch two" in exported
    data = conversation_json(runtime.store, original.conversation_id)
    assert [b["fork"]["branch"] for b in data["runs"][0]["branches"]] == [1, 2]
    assert "answer of branch two" in conversation_markdown(runtime.store, original.conversation_id)
    # The branch alone, as `stiva history show BRANCH` prints it: kept steps say so.
    alone = run_markdown(runtime.store.get_trace(second.result.run_id), plan=True)
    assert "Step 2 · `w2` · reads the question only · kept" in alone
    assert "Step 1 · `w2` · reads the question only · finished" in alone


async def test_a_branch_forked_again_starts_from_its_outputs_and_is_kept_under_the_same_run(runtime, fake):
    original = await asked(runtime, fake)
    fake.script("w3", Reply("draft B from w3"))
    fake.script("w1", Reply("answer of branch one"))
    first = await runtime.sessions.fork(Fork(original.run_id, "2", "w3"))
    runtime.store.wait_for_writes()
    before = counts(fake)
    fake.script("w2", Reply("answer of branch two"))
    second = await runtime.sessions.fork(Fork(first.result.run_id, "4", "w2"))
    after = counts(fake)
    assert {m: after[m] - before[m] for m in MODELS} == {"cond": 0, "w1": 0, "w2": 1, "w3": 0}
    assert "draft B from w3" in fake.requests_for("w2")[-1].user_text  # branch 1's step 2, kept
    assert (second.branch, second.original, second.plan.start) == (2, original.run_id, first.result.run_id)
    runtime.store.wait_for_writes()
    trace = runtime.store.get_trace(original.run_id)
    assert [b.answer for b in trace.branches] == ["answer of branch one", "answer of branch two"]
    assert all(b.fork.of == original.run_id for b in trace.branches)
    # deleting the run deletes its branches (schema V8's ON DELETE CASCADE): none is left unlisted
    runtime.store.delete_run(original.run_id)
    for branch in (first, second):
        with pytest.raises(NotFoundError):
            runtime.store.get_trace(branch.result.run_id)


async def test_a_cancelled_fork_leaves_the_original_untouched(runtime, fake):
    original = await asked(runtime, fake)
    fake.script("w3", Reply("slow words that take a while to arrive here", chunk_delay_s=0.3))
    started = asyncio.Event()

    def watch(event):
        if isinstance(event, ev.StepDelta):
            started.set()

    task = asyncio.ensure_future(runtime.sessions.fork(Fork(original.run_id, "2", "w3"), emit=watch))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    runtime.store.wait_for_writes()
    trace = runtime.store.get_trace(original.run_id)
    assert without_branches(trace) == without_branches(original)
    assert trace.status == "finished" and trace.answer == "combined: B and A checked"
    (branch,) = trace.branches
    assert branch.status == "cancelled"
    assert branch.rounds[0].steps[1].output.startswith("slow")  # what it had streamed is kept
    assert [m.content for m in runtime.store.get_conversation(original.conversation_id).messages] == [
        "Write it.",
        "combined: B and A checked",
    ]


async def test_a_vote_between_a_run_and_its_branch_is_a_preference_pair(runtime, fake):
    original = await asked(runtime, fake)
    fake.script("w3", Reply("draft B from w3"))
    fake.script("w1", Reply("better"))
    forked = await runtime.sessions.fork(Fork(original.run_id, "2", "w3"))
    runtime.store.wait_for_writes()
    start = runtime.sessions.compare_branches(original.run_id, [forked.result.run_id])
    assert start.run_ids == {"conductor": original.run_id, "branch:1": forked.result.run_id}
    runtime.store.record_vote(start.session_id, "branch:1")
    assert runtime.store.leaderboard() == []  # a run beside its branch is no race between systems
    harvest = read_votes(runtime.store)
    (pair,) = harvest.pairs
    assert (pair.chosen_system, pair.rejected_system) == ("branch:1", "conductor")
    assert pair.chosen.models == ("w1", "w3", "w3", "w1") and pair.rejected.models == ("w1", "w2", "w3", "w1")
    assert pair.question == "Write it."


VOTE_PLAN = (
    "Three solve, one vote.\nmodel_id = [1, 2, 3, 1]\n"
    'subtasks = ["Solve it.", "Solve it.", "Solve it.", "vote"]\naccess_list = [[], [], [], [0, 1, 2]]'
)
GATE_PLAN = (
    "Two solve; a judge only where they disagree.\nmodel_id = [1, 2, 1, 3]\n"
    'subtasks = ["Solve it.", "Solve it.", "stop if they agree", "Judge the answers."]\n'
    "access_list = [[], [], [0, 1], [0, 1]]"
)


async def step_2_forked_to_42(runtime, fake, plan: str, w3_says: str, emit=None):
    """`plan` asked (w1 says 42, w2 41, w3 `w3_says`), then its step 2 forked onto w1, which says 42
    again: (the first run's answer, the fork's outcome, the calls the fork made per model)."""
    fake.script("cond", Reply(plan))
    fake.script("w1", Reply("The answer is 42."))
    fake.script("w2", Reply("The answer is 41."))
    fake.script("w3", Reply(w3_says))
    # a question that asks for a final answer: its answers can be compared (open_text.comparable)
    asked_ = await runtime.sessions.ask(Ask("What is it? Give the final answer.", source="cli"))
    first_answer = asked_.result.answer
    runtime.store.wait_for_writes()
    before = counts(fake)
    fake.script("w1", Reply("The answer is 42."))
    outcome = await runtime.sessions.fork(Fork(asked_.result.run_id, "2", "w1"), emit=emit)
    after = counts(fake)
    return first_answer, outcome, {m: after[m] - before[m] for m in MODELS}


async def test_a_vote_that_reads_the_forked_step_is_counted_again_and_calls_nothing(runtime, fake):
    events: list = []
    first_answer, outcome, calls = await step_2_forked_to_42(
        runtime, fake, VOTE_PLAN, "The answer is 41.", emit=events.append
    )
    assert first_answer == "The answer is 41."
    assert calls == {"cond": 0, "w1": 1, "w2": 0, "w3": 0}
    assert outcome.result.answer == "The answer is 42."  # 42 now has two of three: the first step's
    (vote,) = [e for e in events if isinstance(e, ev.StepFinished) and e.index == 3]
    assert vote.note.startswith("vote: 2 of 3") and "42" in vote.note


async def test_a_gate_that_now_agrees_skips_the_judge_the_run_called(runtime, fake):
    first_answer, outcome, calls = await step_2_forked_to_42(runtime, fake, GATE_PLAN, "Judged: 42.")
    assert first_answer == "Judged: 42."  # they disagreed: the judge ran
    # step 2 again on w1; the gate counts again, finds agreement, and the judge is not called
    assert calls == {"cond": 0, "w1": 1, "w2": 0, "w3": 0}
    assert outcome.result.answer == "The answer is 42."
    runtime.store.wait_for_writes()
    branch = runtime.store.get_trace(outcome.result.run_id)
    assert [s.status for s in branch.rounds[0].steps] == ["finished", "finished", "finished", "skipped"]
    assert branch.rounds[0].steps[0].kept and not branch.rounds[0].steps[2].kept


@pytest.mark.parametrize(
    ("run", "step", "model", "says"),
    [
        ("feedface", "2", "w3", "no run or conversation feedface"),
        (None, "9", "w3", "has no step 9: its plan has steps 1 to 4"),
        (None, "0", "w3", "is no step"),
        (None, "two", "w3", "is no step"),
        (None, "2", "gpt-nope", "model 'gpt-nope' is not available; available: cond, w1, w2, w3"),
        (None, "3.2", "w3", "only the last round's steps"),
    ],
)
async def test_a_fork_that_cannot_run_says_why_in_one_line_and_runs_nothing(runtime, fake, run, step, model, says):
    original = await asked(runtime, fake)
    before = counts(fake)
    with pytest.raises(AskError, match=says) as error:
        await runtime.sessions.fork(Fork(run or original.run_id, step, model))
    assert "\n" not in str(error.value)
    assert counts(fake) == before
    assert runtime.store.get_trace(original.run_id).branches == []


async def test_a_conversation_id_or_an_unfinished_run_is_no_fork(runtime, fake):
    original = await asked(runtime, fake)
    with pytest.raises(AskError, match="is a conversation: fork one of its runs"):
        await runtime.sessions.fork(Fork(original.conversation_id, "1", "w2"))
    fake.script("cond", Reply(PLAN))
    fake.script("w1", Reply(status=400, error_message="no"))
    failed = await runtime.sessions.ask(Ask("Fails.", source="cli", options={"max_fallbacks": 0}))
    assert failed.result.status == "failed"
    runtime.store.wait_for_writes()
    with pytest.raises(AskError, match=r"is failed: only a finished run can be forked"):
        await runtime.sessions.fork(Fork(failed.result.run_id, "2", "w3"))


def test_readers_are_the_step_those_that_read_it_through_others_and_the_stages_after_a_gate():
    chain = Workflow((Step(0, "a", ()), Step(1, "b", (0,)), Step(2, "c", ()), Step(3, "d", (1,))))
    assert readers(chain, 0) == {0, 1, 3}
    assert readers(chain, 2) == {2}
    gate = Workflow(
        (
            Step(0, "a", ()),
            Step(1, "b", ()),
            Step(2, "stop if they agree", (0, 1), kind="agree"),
            Step(3, "judge", ()),
        )
    )
    assert readers(gate, 1) == {1, 2, 3}  # the gate reads it; the step after the gate runs only as it says
    assert readers(gate, 3) == {3}
    assert parse_step("2.3") == (2, 2) and parse_step(" 4 ") == (None, 3)
    with pytest.raises(ForkError):
        parse_step("1.0")


# --- the command line: stiva ask --fork ----------------------------------------------------------

CLI_PLAN = 'Two drafts, one judge.\nmodel_id = [1, 2, 1]\nsubtasks = ["draft A", "draft B", "combine"]\naccess_list = [[], [], [0, 1]]'


@pytest.fixture
def cli_config(fake, tmp_path):
    from tests.support.pool import write_lab_config

    fake.script("cond", Reply(CLI_PLAN, usage=(50, 20)))
    fake.script("w1", Reply("draft one", usage=(10, 3)), Reply("the combined answer", usage=(10, 3)))
    fake.script("w2", Reply("draft two", usage=(12, 2)))
    return write_lab_config(tmp_path / "c.toml", fake.base_url, [("cond", 1.0, 1.0), "w1", "w2", "w3"])


def test_stiva_ask_fork_prints_the_branch_and_calls_only_what_it_reruns(cli_config, fake, stiva_home):
    from tests.support.cli import run_stiva

    asked_ = run_stiva("ask", "What is it?", "--config", str(cli_config), "--json", home=stiva_home)
    assert asked_.returncode == 0, asked_.stderr
    run_id = json.loads(asked_.stdout)["run_id"]
    before = {m: len(fake.requests_for(m)) for m in ("cond", "w1", "w2", "w3")}
    fake.script("w3", Reply("draft two, by w3", usage=(7, 5)))
    fake.script("w1", Reply("the branch's answer", usage=(20, 4)))
    done = run_stiva(
        "ask", "--fork", f"{run_id[:8]}:2", "--model", "w3", "--subtask", "draft B, shorter",
        "--config", str(cli_config), home=stiva_home,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    after = {m: len(fake.requests_for(m)) for m in ("cond", "w1", "w2", "w3")}
    assert {m: after[m] - before[m] for m in after} == {"cond": 0, "w1": 1, "w2": 0, "w3": 1}
    out = done.stdout
    assert "the branch's answer" in out
    assert "Step 1 · w1 · reads the question only · kept" in out.replace("`", "")
    assert "Step 2 · w3 · reads the question only · finished: draft B, shorter" in out.replace("`", "")
    assert f"branch 1 of run {run_id}" in done.stderr
    # --json: the branch's trace; its totals are the two calls it made
    fake.script("w3", Reply("again", usage=(1, 1)))
    fake.script("w1", Reply("third answer", usage=(2, 2)))
    as_json = run_stiva(
        "ask", "--fork", f"{run_id}:2", "--model", "w3", "--config", str(cli_config), "--json", home=stiva_home
    )
    assert as_json.returncode == 0, as_json.stderr
    branch = json.loads(as_json.stdout)
    assert branch["fork"]["of"] == run_id and branch["fork"]["branch"] == 2 and branch["answer"] == "third answer"
    assert (branch["totals"]["prompt_tokens"], branch["totals"]["completion_tokens"]) == (3, 3)
    shown = run_stiva("--config", str(cli_config), "history", "show", run_id, home=stiva_home)
    assert shown.returncode == 0, shown.stderr
    assert "Branch 1: step 2 on w3" in shown.stdout.replace("`", "")
    assert "Branch 2: step 2 on w3" in shown.stdout.replace("`", "") and "third answer" in shown.stdout


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--fork", "{run}:7", "--model", "w3"], "has no step 7: its plan has steps 1 to 3"),
        (["--fork", "feedbeef:1", "--model", "w3"], "no run or conversation feedbeef"),
        (["--fork", "{run}:1", "--model", "gpt-9"], "model 'gpt-9' is not available"),
        (["--fork", "{run}:1"], "--fork needs --model M"),
        (["--fork", "{run}", "--model", "w3"], "give RUN_ID:STEP"),
        (["--model", "w3"], "--model and --subtask go with --fork RUN_ID:STEP"),
        (["Why?", "--fork", "{run}:1", "--model", "w3"], "--fork takes no question"),
        (["--fork", "{run}:1", "--model", "w3", "--rounds", "2"], "--rounds does not go with --fork"),
    ],
)
def test_stiva_ask_fork_errors_are_one_line_and_exit_2(cli_config, fake, stiva_home, argv, says):
    from tests.support.cli import run_stiva

    asked_ = run_stiva("ask", "What is it?", "--config", str(cli_config), "--json", home=stiva_home)
    run_id = json.loads(asked_.stdout)["run_id"]
    before = len(fake.requests)
    done = run_stiva("ask", *[a.replace("{run}", run_id) for a in argv], "--config", str(cli_config), home=stiva_home)
    assert done.returncode == 2
    assert says in done.stderr and done.stderr.count("\n") == 1 and done.stderr.startswith("stiva: ")
    assert len(fake.requests) == before


# --- the API: POST /v1/runs/{run_id}/fork on stiva serve ------------------------------------------


@pytest.fixture
def served(fake):
    from tests.test_server import Served, make_config

    server = Served(make_config(fake)).start()
    yield server
    server.stop()


def test_the_fork_endpoint_answers_with_the_branch_and_calls_only_what_it_reruns(served, fake):
    from tests.test_server import PLAN2

    fake.script("cond", Reply(PLAN2, usage=(100, 10)))
    fake.script("w1", Reply("a rough draft", usage=(30, 4)))
    fake.script("w2", Reply("the final answer is 42", usage=(40, 6)))
    reply = served.client().chat.completions.create(model="conductor", messages=[{"role": "user", "content": "6*7?"}])
    run_id = reply.id.removeprefix("chatcmpl-")
    served.wait_run(run_id, "finished")
    before = {m: len(fake.requests_for(m)) for m in ("cond", "w1", "w2")}
    fake.script("w1", Reply("the final answer is 42, says w1", usage=(35, 8)))
    answer = served.post({"step": 2, "model": "w1", "subtask": "finish it"}, path=f"/v1/runs/{run_id}/fork")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "stiva.branch" and body["run_id"] == run_id and body["branch"] == 1
    assert body["answer"] == "the final answer is 42, says w1"
    usage = body["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (35, 8, 43)
    assert usage["stiva_orchestration"]["total_tokens"] == 0  # a fork plans nothing
    after = {m: len(fake.requests_for(m)) for m in ("cond", "w1", "w2")}
    assert {m: after[m] - before[m] for m in after} == {"cond": 0, "w1": 1, "w2": 0}
    steps = body["stiva_trace"]["rounds"][0]["steps"]
    assert [(s["model"], s["attempts"]) for s in steps] == [("w1", 0), ("w1", 1)]  # step 1 kept
    assert answer.headers["x-stiva-run-id"] == body["id"]
    trace = served.store.get_trace(run_id)
    assert trace.answer == "the final answer is 42" and [b.run_id for b in trace.branches] == [body["id"]]
    # The same through the openai client's generic POST, as any client would call it.
    fake.script("w2", Reply("again, 42", usage=(1, 1)))
    again = served.client().post(f"/runs/{run_id[:8]}/fork", body={"step": "2", "model": "w2"}, cast_to=object)
    assert again["branch"] == 2 and again["answer"] == "again, 42"


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/v1/runs/feedbeef/fork", {"step": 1, "model": "w1"}, 404, "run_not_found"),
        ("/v1/runs/{run}/fork", {"step": 5, "model": "w1"}, 400, "invalid_fork"),
        ("/v1/runs/{run}/fork", {"step": 1, "model": "gpt-9"}, 400, "invalid_fork"),
        ("/v1/runs/{run}/fork", {"step": 1}, 400, None),
        ("/v1/runs/{run}/fork", {"step": 1, "model": "w1", "temperature": 2}, 400, None),
    ],
)
def test_a_fork_the_server_cannot_run_is_an_error_object_and_calls_nothing(served, fake, path, body, status, code):
    from tests.test_server import PLAN2

    fake.script("cond", Reply(PLAN2))
    reply = served.client().chat.completions.create(model="conductor", messages=[{"role": "user", "content": "6*7?"}])
    run_id = reply.id.removeprefix("chatcmpl-")
    served.wait_run(run_id, "finished")
    before = len(fake.requests)
    answer = served.post(body, path=path.replace("{run}", run_id))
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["message"] and "\n" not in error["message"]
    if code is not None:
        assert error["code"] == code
    assert len(fake.requests) == before
    assert (
        served.post(
            {"step": 1, "model": "w1"}, path=f"/v1/runs/{run_id}/fork", headers={"authorization": ""}
        ).status_code
        == 401
    )
