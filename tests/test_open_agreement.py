"""Open answers (issue 57, part 3): where no final answer can be read, two answers that say the
same thing agree by their text (core/open_text.py), or by a judge call (`[workflows]
open_agreement = "judge"`), live against real HTTP servers on 127.0.0.1; and a live open question
whose answers cannot be compared gets one model, never a vote or a cascade, from a planner, a
router or `stiva ask --baseline`."""

from __future__ import annotations

import itertools
import json

import pytest
from conftest import pool_models

from stiva_tui.config import ConfigError, load_config
from stiva_tui.core import events as ev
from stiva_tui.core import open_text
from stiva_tui.core.run_state import RunState
from stiva_tui.core.usage import Usage
from stiva_tui.core.workflow import parse_workflow
from stiva_tui.engine.baselines import cascade_workflow
from stiva_tui.engine.executor import OPEN_NOTE, Engine, RunOptions
from stiva_tui.pool.client import HttpWorker
from tests.support.cli import ROOT, run_stiva
from tests.support.fakeprovider import Reply
from tests.support.pool import write_lab_config

PAIRS = json.loads((ROOT / "benchmarks" / "data" / "open_agreement_pairs.json").read_text())
TEA = PAIRS["topics"][0]
PARAGRAPH = TEA["answer"]  # "Green tea is best steeped at around 80 °C for 2 to 3 minutes. ..."
LIGHT = TEA["others"][1]["text"]  # the same, a few words changed
OTHER = TEA["others"][5]["text"]  # another claim: boiling water, five minutes
QUESTION = "How should I brew green tea?"


# --- by text -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "agree", "says"),
    [
        (PARAGRAPH, PARAGRAPH, True, "identical"),
        (PARAGRAPH, "# " + PARAGRAPH.upper().replace(". ", ".\n\n* "), True, "identical"),  # markdown, case, lines
        (PARAGRAPH, LIGHT, True, "similarity 0.9"),
        (PARAGRAPH, TEA["others"][2]["text"], False, ""),  # a paraphrase: the judge's job, not text's
        (PARAGRAPH, PARAGRAPH.replace("2 to 3", "4 to 5"), False, "numbers differ: 3, 4, 5"),  # "two" is 2, in both
        (PARAGRAPH, PARAGRAPH.replace("1,000", "1000"), True, "identical"),
        ("It costs 1,000 dollars.", "It costs 1000 dollars.", True, "identical"),
        ("It costs 2.50 dollars.", "It costs 2.5 dollars.", True, "identical"),
        ("The drug is safe for children.", "The drug is not safe for children.", False, "negates"),
        ("The drug isn't safe for children.", "The drug is not safe for children.", True, "identical"),
        ("Reads get faster and writes get slower.", "Reads get slower and writes get faster.", False, "opposite"),
        (
            "Plants die of overwatering, not underwatering.",
            "Plants die of underwatering, not overwatering.",
            False,
            "order",
        ),
        ("", PARAGRAPH, False, "no words"),
        ("", "", False, "no words"),
    ],
)
def test_open_answers_agree_by_text_only_where_they_say_the_same_thing(a, b, agree, says):
    verdict = open_text.compare(a, b)
    assert verdict.agree is agree and says in verdict.reason, verdict
    assert open_text.compare(b, a).agree is agree  # symmetric


def test_agreement_and_groups_do_not_depend_on_the_order_given():
    texts = [PARAGRAPH, OTHER, LIGHT, PARAGRAPH.replace("80", "90")]
    verdicts = {open_text.agree_all(list(p)) for p in itertools.permutations(texts[:3])}
    assert len(verdicts) == 1 and not verdicts.pop().agree
    assert open_text.agree_all([LIGHT, PARAGRAPH]) == open_text.agree_all([PARAGRAPH, LIGHT])
    assert open_text.agree_all([LIGHT, PARAGRAPH]).agree
    for order in itertools.permutations(range(4)):
        found = open_text.groups([texts[i] for i in order])
        assert sorted(sorted(order[i] for i in g) for g in found) == [[0, 2], [1], [3]]


def test_long_and_hostile_answers_are_bounded_and_agree_only_when_they_are_the_same_text():
    long = "word " * (open_text.MAX_CHARS // 5 + 10)
    assert open_text.compare(long, long).agree
    verdict = open_text.compare(long, long + "different ending")
    assert not verdict.agree and "characters" in verdict.reason
    many = "the " * (open_text.MAX_WORDS + 1)
    assert not open_text.compare(many, many + "cat").agree  # over MAX_WORDS: only the same text agrees
    repetitive = "the " * 900
    verdict = open_text.compare(repetitive, repetitive + "a")
    assert not verdict.agree and "too repetitive" in verdict.reason


def test_the_threshold_is_the_one_the_written_pairs_choose_and_the_saved_figures_are_what_they_give():
    from benchmarks.experiments.open_agreement import OUT, by_kind, choose_threshold, figures, load_pairs, scored

    rows = scored(load_pairs())
    threshold = choose_threshold(rows)
    saved = json.loads(OUT.read_text())
    assert threshold == open_text.THRESHOLD == saved["threshold"]
    check = [r for r in rows if r["half"] == "check"]
    assert figures(check, threshold) == saved["with_guards"]["check"]
    assert figures(rows, threshold) == saved["with_guards"]["all"]
    assert by_kind(rows, threshold) == saved["by_kind"]
    # what the docs say: no written disagreeing pair agrees by text; near-duplicates mostly do
    assert saved["with_guards"]["all"]["false_agree"] == 0 and saved["with_guards"]["check"]["recall"] >= 0.75
    assert saved["similarity_alone"]["all"]["false_agree"] > 0  # the guards are what keeps precision
    live = saved["live"]["same_paragraph_text"]
    assert live["cost_usd"] == live["two_cheap_calls_usd"] and not live["dear_called"]


@pytest.mark.parametrize(
    ("question", "kind", "setting", "comparable"),
    [
        ("Tell me about green tea.", "auto", "text", False),
        ("Tell me about green tea.", "auto", "judge", True),
        ("Tell me about green tea.", "exact", "text", True),  # a bench item's kind
        ("What is 6 x 7?", "auto", "text", True),
        ("How many legs does a spider have?", "auto", "text", True),
        ("What is 3 - 1?", "auto", "text", True),
        ("Should I steep green tea 2-3 minutes or longer?", "auto", "text", False),  # a range, not a sum
        ("How long should I steep green tea?", "auto", "text", False),
        ("Which is a mammal?\nA. Shark\nB. Dolphin\nC. Trout", "auto", "text", True),
        ("Is tea a drink? Answer yes or no.", "auto", "text", True),
        ("Explain the proof. Put your final answer in \\boxed{}.", "auto", "text", True),
        ("Write an essay on 1914 and 1918 in 2 pages.", "auto", "text", False),
    ],
)
def test_which_questions_answers_can_be_compared(question, kind, setting, comparable):
    assert open_text.comparable(question, kind, setting) is comparable


# --- live, against real HTTP servers ---------------------------------------------------------------


def _cascade_pool(fake):
    """cheap1, cheap2 (the cheapest: the judge) and dear, priced per 1M tokens."""
    from dataclasses import replace

    prices = {"cheap1": (0.15, 0.6), "cheap2": (0.1, 0.4), "dear": (2.5, 10.0)}
    return [replace(m, price_in=prices[m.id][0], price_out=prices[m.id][1]) for m in pool_models(fake, *prices)]


async def _run(fake, models, workflow, **options):
    worker = HttpWorker(retries=0)
    events: list = []
    result = await Engine(models, worker).run_workflow(
        QUESTION, workflow, models, emit=events.append, options=RunOptions(fallbacks=(), **options)
    )
    await worker.aclose()
    assert result.status == "finished", result.error
    return result, events


def _judged(reply: str, answer: str):
    """cheap2's replies: `reply` to a judge's prompt, `answer` to anything else."""
    return lambda request: (
        Reply(reply, usage=(300, 1)) if "<answer 1>" in request.user_text else Reply(answer, usage=(40, 60))
    )


@pytest.mark.parametrize("setting", ["text", "judge"])
async def test_two_cheap_models_giving_the_same_paragraph_cost_those_two_calls_and_the_dear_one_is_never_asked(
    fake, setting
):
    fake.default("cheap1", Reply(PARAGRAPH, usage=(40, 60)))
    fake.default("cheap2", _judged("yes", PARAGRAPH))
    fake.default("dear", Reply("never asked", usage=(40, 60)))
    models = _cascade_pool(fake)
    result, events = await _run(fake, models, cascade_workflow([2, 1]), open_agreement=setting)
    assert fake.requests_for("dear") == [] and len(fake.requests_for("cheap2")) == 1  # no judge either
    assert result.answer == PARAGRAPH
    two_calls = models[0].cost(Usage(40, 60)) + models[1].cost(Usage(40, 60))
    assert result.totals.cost_usd == pytest.approx(two_calls)
    gate = next(e for e in events if isinstance(e, ev.StepFinished) and e.index == 2)
    assert gate.note == "2 of 2 agree by text (identical)" and gate.cost_usd == 0
    skipped = [e for e in events if isinstance(e, ev.StepSkipped)]
    assert [e.index for e in skipped] == [3] and "agree by text" in skipped[0].reason


async def test_two_different_paragraphs_ask_the_dear_model(fake):
    fake.default("cheap1", Reply(PARAGRAPH, usage=(40, 60)))
    fake.default("cheap2", Reply(OTHER, usage=(40, 60)))
    fake.default("dear", Reply("the dear answer", usage=(40, 60)))
    result, events = await _run(fake, _cascade_pool(fake), cascade_workflow([2, 1]))
    assert result.answer == "the dear answer" and len(fake.requests_for("dear")) == 1
    gate = next(e for e in events if isinstance(e, ev.StepFinished) and e.index == 2)
    assert gate.note.startswith("differ by text (") and gate.note.endswith("): asking dear")


@pytest.mark.parametrize(("verdict", "dear_asked"), [("Yes.", False), ("no", True), ("Maybe so", True)])
async def test_the_judge_is_one_step_on_the_cheapest_model_shown_and_costed(fake, verdict, dear_asked):
    fake.default("cheap1", Reply(PARAGRAPH, usage=(40, 60)))
    fake.default("cheap2", _judged(verdict, OTHER))
    fake.default("dear", Reply("the dear answer", usage=(40, 60)))
    models = _cascade_pool(fake)
    result, events = await _run(fake, models, cascade_workflow([2, 1]), open_agreement="judge")
    judge_calls = [r for r in fake.requests_for("cheap2") if "<answer 1>" in r.user_text]
    assert len(judge_calls) == 1 and PARAGRAPH in judge_calls[0].user_text and OTHER in judge_calls[0].user_text
    assert judge_calls[0].body.get("max_tokens") == 8
    assert len(fake.requests_for("dear")) == (1 if dear_asked else 0)
    judge_cost = models[1].cost(Usage(300, 1))
    started = [e for e in events if isinstance(e, ev.StepStarted) and e.index == 2]
    assert started[-1].model == "cheap2" and "agree in substance" in started[-1].subtask
    finished = [e for e in events if isinstance(e, ev.StepFinished) and e.index == 2]
    assert len(finished) == 1 and finished[0].model == "cheap2" and finished[0].cost_usd == pytest.approx(judge_cost)
    state = RunState()
    for event in events:
        state.apply(event)
    step = state.rounds[0].steps[2]
    assert step.model == "cheap2" and step.cost_usd == pytest.approx(judge_cost) and step.prompt_tokens == 300
    paid = models[0].cost(Usage(40, 60)) + models[1].cost(Usage(40, 60)) + judge_cost
    if dear_asked:
        paid += models[2].cost(Usage(40, 60))
        assert result.answer == "the dear answer" and "they differ" in finished[0].note
    else:
        assert finished[0].note == "judge: they agree" and result.answer == OTHER  # cheap2's: the best-ranked (cheaper)
    assert result.totals.cost_usd == pytest.approx(paid)


async def test_the_tree_shows_the_judge_step_with_its_cost(fake):
    from test_tui_widgets import One

    from stiva_tui.tui.widgets.workflow_tree import WorkflowTree
    from tests.support.tui import labels

    fake.default("cheap1", Reply(PARAGRAPH, usage=(40, 60)))
    fake.default("cheap2", _judged("yes", OTHER))
    fake.default("dear", Reply("never asked"))
    models = _cascade_pool(fake)
    _, events = await _run(fake, models, cascade_workflow([2, 1]), open_agreement="judge")
    state = RunState()
    for event in events:
        state.apply(event)
    tree = WorkflowTree(state)
    async with One(tree).run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        drawn = labels(tree)
    assert any(line.startswith("✓ 3 cheap2  ← 1,2  $0.00003  judge: they agree") for line in drawn), drawn


async def test_a_judge_that_fails_is_no_agreement_and_the_next_stage_answers(fake):
    fake.default("cheap1", Reply(PARAGRAPH, usage=(40, 60)))
    fake.default(
        "cheap2",
        lambda r: Reply(status=500) if "<answer 1>" in r.user_text else Reply(OTHER, usage=(40, 60)),
    )
    fake.default("dear", Reply("the dear answer", usage=(40, 60)))
    result, events = await _run(fake, _cascade_pool(fake), cascade_workflow([2, 1]), open_agreement="judge")
    assert result.answer == "the dear answer"
    gate = next(e for e in events if isinstance(e, ev.StepFinished) and e.index == 2)
    assert "the call failed" in gate.note and gate.cost_usd == 0


async def test_an_open_vote_counts_answers_that_agree_by_text_with_no_call(fake):
    fake.default("a", Reply(LIGHT))
    fake.default("b", Reply(OTHER))
    fake.default("c", Reply(PARAGRAPH))
    fake.default("judge", Reply("never asked"))
    from dataclasses import replace

    models = pool_models(fake, "a", "b", "c", "judge")
    models[2] = replace(models[2], price_in=5.0)  # a ranks above c (cheaper): of the two that agree, a's is returned
    workflow = parse_workflow(
        'model_id = [0, 1, 2, 3]\nsubtasks = ["Answer.", "Answer.", "Answer.", "vote"]\naccess_list = [[], [], [], [0, 1, 2]]',
        pool_size=4,
    )
    result, events = await _run(fake, models, workflow)
    assert fake.requests_for("judge") == [] and result.answer == LIGHT
    vote = next(e for e in events if isinstance(e, ev.StepFinished) and e.index == 3)
    assert vote.note == "vote: 2 of 3 agree by text (steps 1,3)" and vote.cost_usd == 0


async def test_the_agreed_answer_does_not_depend_on_the_listed_order(fake):
    fake.default("cheap1", Reply(PARAGRAPH, usage=(40, 60)))
    fake.default("cheap2", Reply(LIGHT, usage=(40, 60)))
    fake.default("dear", Reply("never asked"))
    models = _cascade_pool(fake)
    first, _ = await _run(fake, models, cascade_workflow([2, 1]))
    second, _ = await _run(fake, [models[1], models[0], models[2]], cascade_workflow([2, 1]))
    assert first.answer == second.answer == LIGHT  # cheap2's: the best-ranked (cheaper) of the two
    assert fake.requests_for("dear") == []


# --- one model where the answers cannot be compared -----------------------------------------------

CASCADE_PLAN = (
    "Two cheap answers, the dear model where they differ.\nmodel_id = [1, 2, 1, 3]\n"
    'subtasks = ["Answer.", "Answer.", "stop if they agree", "Answer."]\naccess_list = [[], [], [0, 1], []]'
)


def _config(fake, tmp_path, setting: str | None = None):
    fake.default("cond", Reply(CASCADE_PLAN, usage=(50, 20)))
    fake.default("cheap1", Reply(PARAGRAPH, usage=(40, 60)))
    fake.default("cheap2", Reply(PARAGRAPH, usage=(40, 60)))
    fake.default("dear", Reply("the dear answer", usage=(40, 60)))
    models = ["cond", ("cheap1", 0.15, 0.6), ("cheap2", 0.1, 0.4), ("dear", 2.5, 10.0)]
    sections = {"workflows": {"open_agreement": setting}} if setting else {}
    return str(write_lab_config(tmp_path / "c.toml", fake.base_url, models, embedded_worker=False, **sections))


@pytest.mark.parametrize("baseline", [None, "cascade:cheap1+cheap2>dear", "vote:cheap1+cheap2+dear"])
def test_a_live_open_question_gets_one_model_and_the_trace_says_why(fake, tmp_path, stiva_home, baseline):
    config = _config(fake, tmp_path)
    args = ["ask", "Tell me about green tea.", "--config", config, "--json"]
    result = run_stiva(*args, *(["--baseline", baseline] if baseline else []), home=stiva_home)
    assert result.returncode == 0, result.stderr
    trace = json.loads(result.stdout)
    assert trace["answer"] == "the dear answer"
    assert fake.requests_for("cheap1") == [] and fake.requests_for("cheap2") == []
    (round1,) = trace["rounds"]
    assert [s["model"] for s in round1["steps"]] == ["dear"]
    assert f"{OPEN_NOTE}: dear, since" in round1["reasoning"] and 'open_agreement = "text"' in round1["reasoning"]
    plain = run_stiva(*args[:-1], *(["--baseline", baseline] if baseline else []), home=stiva_home)
    assert f"{OPEN_NOTE}: dear" in plain.stderr  # the run's notes, as `stiva ask` prints them


def test_with_a_judge_or_a_short_answer_question_the_cascade_runs(fake, tmp_path, stiva_home):
    config = _config(fake, tmp_path, "judge")
    args = ["ask", "Tell me about green tea.", "--config", config, "--baseline", "cascade:cheap1+cheap2>dear"]
    result = run_stiva(*args, "--json", home=stiva_home)
    assert result.returncode == 0, result.stderr
    trace = json.loads(result.stdout)
    assert trace["answer"] == PARAGRAPH and fake.requests_for("dear") == []  # the same paragraph: 2 calls
    assert [s["status"] for s in trace["rounds"][0]["steps"]] == ["finished", "finished", "finished", "skipped"]
    config = _config(fake, tmp_path)  # "text", but the question asks for a short answer
    args = [
        "ask",
        "What is 6 x 7? Reply with one number.",
        "--config",
        config,
        "--baseline",
        "cascade:cheap1+cheap2>dear",
    ]
    trace = json.loads(run_stiva(*args, "--json", home=stiva_home).stdout)
    assert len(trace["rounds"][0]["steps"]) == 4 and OPEN_NOTE not in trace["rounds"][0]["reasoning"]


def test_a_router_that_chooses_workflows_picks_one_model_for_an_open_question(tmp_path, capsys):
    from test_vote_cascade import _trained_router

    from stiva_tui.conductor.router import load_router
    from stiva_tui.core.preference import LEVELS

    _, folder, _ = _trained_router(tmp_path, capsys)
    router = load_router(folder)
    pool = ["replay:cheap1", "replay:cheap2", "replay:dear"]
    question = "What is 5 plus 12? Add the two numbers."
    free = router.decide_workflow(question, pool, LEVELS["cheap"])
    single = router.decide_workflow(question, pool, LEVELS["cheap"], single=True)
    assert len(free.workflow.steps) > 1 and free.name.startswith(("cascade:", "vote:"))
    assert len(single.workflow.steps) == 1 and ":" not in single.name.removeprefix("replay:")


# --- the setting ---------------------------------------------------------------------------------------


def test_open_agreement_is_text_by_default_and_strict(stiva_home, tmp_path):
    from stiva_tui.config import Config
    from stiva_tui.config_template import TEMPLATE

    assert Config().workflows.open_agreement == "text"
    path = tmp_path / "c.toml"
    wanted = ("# [workflows]", "# open_agreement = ")
    text = "\n".join(line[2:] if line.startswith(wanted) else line for line in TEMPLATE.splitlines())
    path.write_text(text.replace('open_agreement = "text"', 'open_agreement = "judge"'))
    assert load_config(path).workflows.open_agreement == "judge"
    for bad in ('open_agreement = "embedding"', "open_agreement = true", 'open_agrement = "text"'):
        path.write_text(f"[workflows]\n{bad}\n")
        with pytest.raises(ConfigError) as info:
            load_config(path)
        message = str(info.value)
        assert message.startswith(str(path)) and "workflows.open_agre" in message and "\n" not in message
