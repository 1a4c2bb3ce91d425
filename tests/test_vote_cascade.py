"""Votes and agreement cascades (issue 51): the workflow format's `vote` and `agree` steps, the
`vote:` and `cascade:` systems, their exact replay on recorded answers (computed here by hand), and
a live cascade against real HTTP servers whose skipped stage is never called or paid."""

from __future__ import annotations

import json

import pytest
from conftest import pool_models

from stiva_tui.core import events as ev
from stiva_tui.core.answers import final_answer, tally
from stiva_tui.core.run_state import RunState
from stiva_tui.core.workflow import AGREE, CALL, VOTE, WorkflowParseError, parse_workflow
from stiva_tui.engine.baselines import cascade_workflow, vote_workflow
from stiva_tui.engine.executor import Engine, RunOptions
from stiva_tui.pool.client import HttpWorker
from stiva_tui.runtime.systems import SystemNameError, parse_system
from tests.support.cli import run_stiva
from tests.support.fakeprovider import Reply

# --- final answers and the count -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ('```json\n{"reasoning": "9 * 2", "answer": "18"}\n```', "number", "18"),
        ("So she makes $1,000.00 a day.", "number", "1000"),
        ("The answer is 0.50", "number", "1/2"),
        ("The answer is 976371000", "number", "976371000"),  # integers stay exact
        ("I pick (B).\nAnswer: B", "choice", "B"),
        ("so \\boxed{\\frac{1}{2}}", "math", "1/2"),
        ("so \\boxed{x^2 + 1}", "math", "x^2+1"),
        ("'abc'", "exact", "abc"),
        ("Rome.", "auto", "rome"),
        ("A long essay\nwith two lines and no final answer", "auto", None),
        ("", "number", None),
    ],
)
def test_final_answers_are_read_by_the_questions_kind(text, kind, expected):
    found = final_answer(text, kind)
    assert (None if found is None else found.key) == expected


def test_a_tie_goes_to_the_best_ranked_step_and_unreadable_answers_vote_for_nothing():
    assert (tally(["1", "2", "3"]).winner, tally(["1", "2", "3"]).first) == ("1", 0)
    ranked = tally(["1", "2", "3"], ranks=[2, 0, 1])  # the rank, not the order, decides a tie
    assert (ranked.winner, ranked.first) == ("2", 1)
    count = tally([None, "7", "7", "8"])
    assert (count.winner, count.votes, count.voters, count.first) == ("7", 2, 4, 1)
    assert not count.unanimous and tally(["7", "7"]).unanimous and not tally([None, None]).unanimous
    assert tally([None, None]).winner is None


# --- the format -------------------------------------------------------------------------------------


def test_a_planner_writes_a_cascade_as_naturally_as_a_chain():
    text = (
        'model_id = [0, 1, 0, 2]\nsubtasks = ["Answer.", "Answer.", "stop if they agree", "Answer."]\n'
        "access_list = [[], [], [0, 1], []]"
    )
    workflow = parse_workflow(text, pool_size=3, max_steps=3)
    assert [s.kind for s in workflow.steps] == [CALL, CALL, AGREE, CALL]
    assert workflow.shape() == "cascade" and workflow.calls == 3 and workflow.gates_before(3) == (2,)
    assert parse_workflow(workflow.to_text(), pool_size=3) == workflow  # it reads back as written
    voted = parse_workflow(
        'model_id = [0, 1, 2, 0]\nsubtasks = ["a", "b", "c", "Vote: the majority answer"]\n'
        "access_list = [[], [], [], [0, 1, 2]]",
        pool_size=3,
        max_steps=3,  # the vote calls no model: it is not counted against the step limit
    )
    assert voted.steps[-1].kind == VOTE and voted.shape() == "vote"


def test_too_many_calls_is_a_typed_error():
    text = 'model_id = [0, 0, 0, 0]\nsubtasks = ["a", "b", "c", "d"]\naccess_list = [[], [], [], []]'
    with pytest.raises(WorkflowParseError, match="4 steps, but at most 3"):
        parse_workflow(text, pool_size=2, max_steps=3)


@pytest.mark.parametrize(
    ("subtasks", "access"),
    [
        (["a", "vote"], [[], [0]]),  # a vote of one step
        (["a", "b", "stop if they agree"], [[], [], [0, 1]]),  # a gate with nothing after it
    ],
)
def test_a_vote_or_gate_that_cannot_be_one_is_a_call_so_every_grammatical_plan_parses(subtasks, access):
    text = f"model_id = {json.dumps([0] * len(subtasks))}\nsubtasks = {json.dumps(subtasks)}\naccess_list = {json.dumps(access)}"
    workflow = parse_workflow(text, pool_size=2, max_steps=3)
    assert workflow.steps[-1].kind == CALL and workflow.steps[-1].subtask == subtasks[-1]
    assert parse_workflow(workflow.to_text(), pool_size=2, max_steps=3) == workflow


def test_votes_are_lazy_and_cascades_end_where_a_stage_agrees():
    three = vote_workflow(3)  # the first two; the third only where they disagree; then the count
    assert [(s.model, s.kind, s.access) for s in three.steps] == [
        (0, CALL, ()),
        (1, CALL, ()),
        (0, AGREE, (0, 1)),
        (2, CALL, ()),
        (0, VOTE, (0, 1, 3)),
    ]
    nested = cascade_workflow([2, 3], last_votes=True)
    assert [s.kind for s in nested.steps] == [CALL, CALL, AGREE, CALL, CALL, AGREE, CALL, VOTE]
    assert nested.steps[-1].access == (3, 4, 6) and [s.model for s in nested.steps if s.calls] == [0, 1, 2, 3, 4]


def test_system_names_for_votes_and_cascades():
    vote = parse_system("vote: a + b + c")
    assert vote.name == "vote:a+b+c" and vote.mode.models == ("a", "b", "c")
    cascade = parse_system("cascade:a+b>vote:c+d+e")
    assert cascade.name == "cascade:a+b>vote:c+d+e" and cascade.mode.models == ("a", "b", "c", "d", "e")
    assert parse_system("cascade:x@sambanova+b>c").mode.models == ("x@sambanova", "b", "c")  # an @ in an id
    for bad, says in (
        ("vote:a", "two or more models"),
        ("cascade:a>b", "two or more models, whose agreement"),
        ("cascade:a+b>c+d", "one model or a vote"),
        ("cascade:a+b", "two or more stages"),
        ("vote:a++b", "empty model name"),
    ):
        with pytest.raises(SystemNameError, match=says):
            parse_system(bad)


# --- live, against real HTTP servers ------------------------------------------------------------------


def _engine(fake, *names):
    models = pool_models(fake, *names)
    worker = HttpWorker(retries=0)
    return Engine(models, worker), models, worker


async def test_a_cascade_whose_first_stage_agrees_never_calls_or_pays_the_next(fake):
    fake.default("cheap1", Reply('{"answer": "42"}', usage=(10, 5)))
    fake.default("cheap2", Reply("The answer is 42.", usage=(10, 5)))
    fake.default("strong", Reply("The answer is 41.", usage=(10, 5)))
    engine, models, worker = _engine(fake, "cheap1", "cheap2", "strong")
    events: list = []
    result = await engine.run_workflow(
        "What is 6 x 7?", cascade_workflow([2, 1]), models, emit=events.append, options=RunOptions(answer_kind="number")
    )
    await worker.aclose()
    assert result.status == "finished" and result.answer == '{"answer": "42"}'
    assert fake.requests_for("strong") == []  # never asked
    skipped = [e for e in events if isinstance(e, ev.StepSkipped)]
    assert [e.index for e in skipped] == [3] and "2 of 2 agree: 42" in skipped[0].reason
    assert result.totals.cost_usd == pytest.approx(2 * (10 * 1.0 + 5 * 2.0) / 1e6)  # two calls paid
    state = RunState()
    for event in events:
        state.apply(event)
    steps = state.rounds[0].steps
    assert [s.status for s in steps] == ["finished", "finished", "finished", "skipped"]
    assert steps[2].note == "2 of 2 agree: 42" and steps[2].cost_usd == 0 and steps[3].cost_usd == 0


async def test_the_tree_shows_the_gates_count_and_the_skipped_step_at_no_cost(fake):
    from test_tui_widgets import One

    from stiva_tui.tui.widgets.workflow_tree import WorkflowTree
    from tests.support.tui import labels

    fake.default("cheap1", Reply('{"answer": "42"}', usage=(10, 5)))
    fake.default("cheap2", Reply("The answer is 42.", usage=(10, 5)))
    fake.default("strong", Reply("never asked"))
    engine, models, worker = _engine(fake, "cheap1", "cheap2", "strong")
    state = RunState()
    await engine.run_workflow(
        "What is 6 x 7?", cascade_workflow([2, 1]), models, emit=state.apply, options=RunOptions(answer_kind="number")
    )
    await worker.aclose()
    tree = WorkflowTree(state)
    async with One(tree).run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        drawn = labels(tree)
    assert any(line.startswith("✓ 3 (agreement)  ← 1,2  2 of 2 agree: 42") for line in drawn), drawn
    assert any(line.startswith("– 4 strong  skipped · $0") for line in drawn), drawn


async def test_a_cascade_whose_first_stage_disagrees_asks_the_next_and_its_answer_stands(fake):
    fake.default("cheap1", Reply("The answer is 42."))
    fake.default("cheap2", Reply("The answer is 40."))
    fake.default("strong", Reply("The answer is 42, surely."))
    engine, models, worker = _engine(fake, "cheap1", "cheap2", "strong")
    events: list = []
    result = await engine.run_workflow(
        "What is 6 x 7?", cascade_workflow([2, 1]), models, emit=events.append, options=RunOptions(answer_kind="number")
    )
    await worker.aclose()
    assert result.answer == "The answer is 42, surely." and len(fake.requests_for("strong")) == 1
    gate = next(e for e in events if isinstance(e, ev.StepFinished) and e.index == 2)
    assert gate.note == "disagree (42, 40): asking strong" and gate.cost_usd == 0
    assert not [e for e in events if isinstance(e, ev.StepSkipped)]


async def test_a_vote_on_an_open_question_is_judged_by_its_model_and_says_so(fake):
    fake.default("a", Reply("A long answer about tea\nthat spans lines."))
    fake.default("b", Reply("Another long answer about tea\nalso on two lines."))
    fake.default("c", Reply("A third view of tea,\nin two lines."))
    fake.default("judge", Reply("A long answer about tea\nthat spans lines."))
    engine, models, worker = _engine(fake, "a", "b", "c", "judge")
    workflow = parse_workflow(
        'model_id = [0, 1, 2, 3]\nsubtasks = ["Answer.", "Answer.", "Answer.", "vote"]\naccess_list = [[], [], [], [0, 1, 2]]',
        pool_size=4,
    )
    events: list = []
    result = await engine.run_workflow("Tell me about tea.", workflow, models, emit=events.append)
    await worker.aclose()
    assert result.status == "finished" and len(fake.requests_for("judge")) == 1
    started = [e for e in events if isinstance(e, ev.StepStarted) and e.index == 3]
    assert started[0].model == "judge" and "Pick the best one" in started[0].subtask


async def test_a_bench_vote_on_a_choice_item_reads_an_options_text_as_its_letter_as_the_grader_does(
    fake, tmp_path, stiva_home
):
    # Two models answer with the right option's text, one with another letter. The grader reads
    # "Mercury" as B; so must the vote: B, 2 of 3. Before, the vote read no letter in "Mercury",
    # and with no room for a judge call (max_steps 3) took the one letter it could read, C: wrong.
    from stiva_tui.bench.runner import BenchRunner
    from stiva_tui.config import load_config
    from stiva_tui.evals.loaders import load_suite
    from stiva_tui.runtime import Runtime
    from stiva_tui.runtime.systems import parse_systems
    from tests.support.pool import write_lab_config

    item = {
        "id": "planet",
        "question": "Which planet is closest to the Sun?",
        "choices": ["Venus", "Mercury", "Mars", "Earth"],
        "answer": "B",
        "grader": "choice",
    }
    suite = tmp_path / "s.jsonl"
    suite.write_text(json.dumps(item) + "\n")
    fake.default("m1", Reply("Mercury."))
    fake.default("m2", Reply("C"))
    fake.default("m3", Reply("The answer is Mercury."))
    config = write_lab_config(
        tmp_path / "c.toml", fake.base_url, ["cond", "m1", "m2", "m3"], conductor={"max_steps": 3}
    )
    runtime = await Runtime.create(load_config(config), discover=False)
    try:
        outcome = await BenchRunner(runtime, load_suite(str(suite)), parse_systems(["vote:m1+m2+m3"])).run()
        (record,) = outcome.records
        trace = runtime.store.get_trace(record.run_id)
    finally:
        await runtime.aclose()
    assert (record.status, record.correct, record.extracted, record.answer) == ("graded", True, "B", "Mercury.")
    vote = trace.rounds[0].steps[-1]
    assert (vote.model, vote.output) == ("(vote)", "Mercury.")
    assert [len(fake.requests_for(m)) for m in ("m1", "m2", "m3")] == [1, 1, 1]  # no judge call


def test_the_routers_training_reads_an_options_text_as_its_letter_as_the_bench_does(fake, tmp_path, stiva_home):
    # The router learns from computed votes and cascades (train/router.py `graded_answers`): they
    # must read "Mercury" as B, as the grader and a bench's vote do, or it learns another vote.
    from stiva_tui.config import load_config
    from stiva_tui.evals.loaders import load_suite
    from stiva_tui.train.router import graded_answers
    from tests.support.pool import write_lab_config

    item = {"id": "planet", "question": "Which planet is closest to the Sun?", "grader": "choice",
            "choices": ["Venus", "Mercury", "Mars", "Earth"], "answer": "B"}  # fmt: skip
    suite = tmp_path / "s.jsonl"
    suite.write_text(json.dumps(item) + "\n")
    fake.default("m1", Reply("Mercury."))
    fake.default("m2", Reply("C"))
    fake.default("m3", Reply("The answer is Mercury."))
    config = write_lab_config(tmp_path / "c.toml", fake.base_url, ["cond", "m1", "m2", "m3"], embedded_worker=False)
    labels = graded_answers(load_config(config), load_suite(str(suite)))
    finals = {m: str(labels.finals[m][0]) for m in labels.models}
    assert {m: finals[m] for m in ("m1", "m2", "m3")} == {"m1": "B", "m2": "C", "m3": "B"}, finals


# --- exact replay on recorded answers -----------------------------------------------------------------

# Four questions, four models; each answer's cost is recorded. By hand:
#   q1 (5): A 5, B 5, C 6, D 6      q2 (7): A 7, B 8, C 7, D 8
#   q3 (9): A 1, B 2, C 9, D 2      q4 (4): A 3, B 3, C 4, D 4
COST = {"A": 0.001, "B": 0.002, "C": 0.01, "D": 0.005}
# Ties and agreements go to the best-ranked model, by its record (right on the items SAID lists:
# C 3 of 4, A 2, B 1 and D 1, B the cheaper of those two), never by the order a system lists them in.
RANK = {"C": (-0.75, COST["C"]), "A": (-0.5, COST["A"]), "B": (-0.25, COST["B"]), "D": (-0.25, COST["D"])}
SAID = {
    "q1": ("What is 2 + 3?", "5", {"A": "5", "B": "5", "C": "6", "D": "6"}),
    "q2": ("What is 3 + 4?", "7", {"A": "7", "B": "8", "C": "7", "D": "8"}),
    "q3": ("What is 4 + 5?", "9", {"A": "1", "B": "2", "C": "9", "D": "2"}),
    "q4": ("What is 1 + 3?", "4", {"A": "3", "B": "3", "C": "4", "D": "4"}),
}


def _records(path):
    rows = []
    for item, (question, answer, said) in SAID.items():
        for model, value in said.items():
            rows.append(
                {
                    "id": item,
                    "question": question,
                    "model": model,
                    "response": f'{{"reasoning": "adding", "answer": "{value}"}}',
                    "correct": value == answer,
                    "answer": answer,
                    "prompt_tokens": 100,
                    "completion_tokens": 100,
                    "cost_usd": COST[model],
                    "split": "train",  # every item: the models' rank is their record on all four
                }
            )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@pytest.mark.slow
def test_votes_and_cascades_replay_exactly_what_the_recorded_answers_give(tmp_path, stiva_home):
    imported = run_stiva(
        "bench", "import", str(_records(tmp_path / "r.jsonl")), "--name", "hand", "--json", home=stiva_home
    )
    assert imported.returncode == 0, imported.stderr
    info = json.loads(imported.stdout)
    systems = (
        "direct:replay:A,vote:replay:A+replay:B+replay:C,vote:replay:C+replay:B+replay:A,"
        "cascade:replay:A+replay:B>replay:C,cascade:replay:B+replay:A>replay:C,"
        "cascade:replay:A+replay:B>vote:replay:C+replay:D+replay:A"
    )
    done = run_stiva(
        "bench", info["suite"], "--pool", f"replay:{info['bench']}", "--systems", systems, "--json", home=stiva_home
    )
    assert done.returncode == 0, done.stderr
    rows = {row["system"].replace("replay:", ""): row for row in json.loads(done.stdout)["systems"]}
    a, b, c, d = COST["A"], COST["B"], COST["C"], COST["D"]
    expected = {
        # A alone: right on q1, q2
        "direct:A": (2 / 4, 4 * a),
        # q1 A=B=5 right (C never asked); q2 7,8,7 -> 7 right; q3 1,2,9 -> a tie, C's 9 (the
        # best-ranked), right; q4 A=B=3 wrong (C never asked)
        "vote:A+B+C": (3 / 4, 4 * (a + b) + 2 * c),
        "vote:C+B+A": (3 / 4, 4 * (c + b + a)),  # listed in another order: C and B first, never agreeing
        # q1 agree, right; q2 and q3 C answers, right; q4 agree on 3, wrong
        "cascade:A+B>C": (3 / 4, 4 * (a + b) + 2 * c),
        "cascade:B+A>C": (3 / 4, 4 * (a + b) + 2 * c),
        # q2: C 7, D 8 disagree -> A 7: 7 wins; q3: C 9, D 2 -> A 1: a tie, C's 9 (the best-ranked)
        "cascade:A+B>vote:C+D+A": (3 / 4, 4 * (a + b) + 2 * (c + d + a)),
    }
    for system, (accuracy, total) in expected.items():
        assert rows[system]["accuracy"] == pytest.approx(accuracy), system
        assert rows[system]["cost_per_question"] == pytest.approx(total / 4, rel=1e-6), system


def test_the_computed_replay_gives_what_the_executor_gave_on_the_replay_pool():
    """core/replayed.py (what the router learns from) against the figures the replay pool gave above."""
    from stiva_tui.core.replayed import Answer, replay_workflow

    def total(name):
        mode = parse_system(name).mode
        right = spent = 0.0
        for _, (_, answer, said) in SAID.items():
            answers = {
                m: Answer(final_answer(f'{{"answer": "{v}"}}', "number"), float(v == answer), COST[m])
                for m, v in said.items()
            }
            outcome = replay_workflow(mode.workflow, mode.models, answers, RANK)
            right, spent = right + outcome.correct, spent + outcome.cost_usd
        return right / 4, spent

    a, b, c, d = COST["A"], COST["B"], COST["C"], COST["D"]
    assert total("vote:A+B+C") == (pytest.approx(0.75), pytest.approx(4 * (a + b) + 2 * c))
    # a lazy vote asks the first two listed: another order pays other models, and gives the same answers
    assert total("vote:C+A+B")[0] == total("vote:B+C+A")[0] == pytest.approx(0.75)
    assert total("cascade:B+A>C") == total("cascade:A+B>C")
    assert total("cascade:A+B>C") == (pytest.approx(0.75), pytest.approx(4 * (a + b) + 2 * c))
    assert total("cascade:A+B>vote:C+D+A") == (pytest.approx(0.75), pytest.approx(4 * (a + b) + 2 * (c + d + a)))


# --- the router chooses the workflow -----------------------------------------------------------------


def _two_kinds(path, count: int = 30, agree_wrong: bool = False):
    """Sums, on which the two cheap models agree and are right; capitals, on which they disagree and
    are wrong (`agree_wrong`: agree, and are wrong, so no cascade can tell); `dear` is right on all
    at 100 times their cost. `count` of each kind."""
    from test_router import CAPITALS

    CAPITALS = [*CAPITALS, *(f"Land{i}" for i in range(len(CAPITALS), count))]
    rows = []
    for n in range(count):
        split = "heldout" if n % 3 == 0 else "train"
        items = (
            (f"sum-{n}", f"What is {n} plus {n + 7}? Add the two numbers.", str(2 * n + 7), ("x", "y")),
            (
                f"cap-{n}",
                f"What is the capital city of {CAPITALS[n]}?",
                f"Capital{n}",
                ("Paris", "Paris" if agree_wrong else "Rome"),
            ),
        )
        for item_id, question, answer, (wrong1, wrong2) in items:
            easy = item_id.startswith("sum")
            said = {"cheap1": answer if easy else wrong1, "cheap2": answer if easy else wrong2, "dear": answer}
            for model, value in said.items():
                rows.append(
                    {"id": item_id, "question": question, "model": model, "response": f"The answer is {value}.",
                     "correct": value == answer, "answer": answer, "split": split,
                     "cost_usd": 0.1 if model == "dear" else 0.001}
                )  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _stiva_json(capsys, *args: str):
    """`stiva ARGS` run in this process (cli.main), which must exit 0: what it printed, read as JSON."""
    from stiva_tui.cli.main import main

    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _trained_router(tmp_path, capsys, *options: str, count: int = 30, agree_wrong: bool = False):
    """`_two_kinds` imported as a bench, and a router trained on its train split into
    tmp_path/router (`options`: more of `stiva train router`'s): (the import's JSON, the router's
    folder, the training's JSON)."""
    bench = _two_kinds(tmp_path / "r.jsonl", count, agree_wrong=agree_wrong)
    imported = _stiva_json(capsys, "bench", "import", str(bench), "--json")
    folder = tmp_path / "router"
    summary = _stiva_json(
        capsys, "train", "router", imported["suite"], "--split", "train", "--pool", f"replay:{imported['bench']}",
        *options, "--out", str(folder), "--json",
    )  # fmt: skip
    return imported, folder, summary


def test_the_router_pays_for_the_dear_model_only_where_the_cheap_ones_cannot_be_trusted(tmp_path, capsys):
    from stiva_tui.conductor.router import load_router
    from stiva_tui.core.preference import LEVELS

    imported, folder, summary = _trained_router(tmp_path, capsys)
    assert "cascade:cheap1+cheap2>dear" in summary["workflows"]["candidates"]
    router = load_router(folder)
    pool = ["replay:cheap1", "replay:cheap2", "replay:dear"]
    hard = router.decide_workflow("What is the capital city of Laos?", pool, LEVELS["balanced"])
    assert hard.chance > 0.9 and ("dear" in hard.name) and hard.workflow.calls >= 1
    report = _stiva_json(
        capsys, "bench", imported["suite"], "--split", "heldout", "--pool", f"replay:{imported['bench']}",
        "--systems", f"direct:replay:dear,router:{folder}@balanced", "--json",
    )  # fmt: skip
    rows = {row["system"]: row for row in report["systems"]}
    routed = rows[f"router:{folder}@balanced"]
    # every held-out question right, for well under the dear model's cost
    assert routed["accuracy"] == 1.0 and rows["direct:replay:dear"]["accuracy"] == 1.0
    assert routed["cost_per_question"] < 0.6 * rows["direct:replay:dear"]["cost_per_question"]


def test_a_damaged_workflow_choice_is_one_line(tmp_path, capsys):
    from stiva_tui.conductor.router import RouterError, load_router

    _, folder, _ = _trained_router(tmp_path, capsys)
    data = json.loads((folder / "router.json").read_text())
    data["workflows"]["models"][0] = ["not-a-model"]
    (folder / "router.json").write_text(json.dumps(data))
    with pytest.raises(RouterError, match="workflow choice is damaged; train it again"):
        load_router(folder)


def test_ask_baseline_and_compare_columns_read_votes_and_cascades(fake):
    from stiva_tui.runtime.modes import WorkflowMode
    from stiva_tui.runtime.systems import column_system, one_system

    models = pool_models(fake, "a", "b", "c")
    assert isinstance(one_system("cascade:a+b>c", models).mode, WorkflowMode)
    assert column_system("vote:a+b+c", models).name == "vote:a+b+c"
    with pytest.raises(SystemNameError, match="d is not in the pool"):
        one_system("cascade:a+b>d", models)


async def test_compare_offers_a_vote_and_a_cascade_and_runs_the_cascade_with_its_skipped_step(fake):
    from textual.widgets import SelectionList

    from stiva_tui.tui.app import StivaApp
    from stiva_tui.tui.screens.compare import CompareScreen, workflow_systems
    from tests.support.tui import make_runtime, make_test_config, wait_for

    fake.default("w1", Reply("The answer is 42."))
    fake.default("w2", Reply('{"answer": "42"}'))
    fake.default("cond", Reply("42"))  # every model gives 42: the first stage agrees
    config = make_test_config(fake)
    runtime = await make_runtime(config)
    try:
        offered = workflow_systems(runtime.models)
        assert [s.split(":")[0] for s in offered] == ["vote", "cascade"], offered
        cascade = offered[1]
        app = StivaApp(config, runtime=runtime)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = CompareScreen(runtime, question="What is 6 x 7?")
            await app.push_screen(screen)
            await pilot.pause()
            listed = [str(o.prompt) for o in screen.query_one(SelectionList)._options]
            assert any("where they disagree" in line for line in listed) and any(
                "(majority)" in line for line in listed
            )
            await screen.start("What is 6 x 7?", [cascade])
            await wait_for(pilot, lambda: all(c.finished for c in screen.columns), what="the cascade's column")
            column = screen.columns[0]
            assert column.answer in ("The answer is 42.", '{"answer": "42"}', "42")  # the agreed answer
            trace = runtime.store.get_trace(column.run_id)  # what the column's Tree button opens
            steps = trace.rounds[0].steps
            assert [s.status for s in steps] == ["finished", "finished", "finished", "skipped"]
            assert steps[2].model == "(agreement)" and steps[3].cost_usd == 0
    finally:
        await runtime.aclose()


def test_features_auto_keeps_the_representation_whose_workflow_choice_validates_best(tmp_path, capsys, monkeypatch):
    """`--features auto` scores each representation on the same validation draw; here the "embedded"
    one is replaced by noise (no model is loaded), so tfidf, which tells sums (a cheap model is
    right) from capitals (only the dear one is), wins."""
    import numpy as np

    from stiva_tui.conductor.router import load_router
    from stiva_tui.train import router as training

    real = training.featurize

    def featurize(kind, texts, *, vectorizer=None, progress=None):
        if kind == "embedded":
            return np.random.default_rng(0).normal(size=(len(texts), 16)).astype(np.float32)
        return real(kind, texts, vectorizer=vectorizer, progress=progress)

    monkeypatch.setattr(training, "featurize", featurize)
    # enough train questions (200) that the 25 nearest are a neighbourhood, not the whole set
    _, folder, summary = _trained_router(tmp_path, capsys, "--features", "auto", count=150, agree_wrong=True)
    chosen = summary["representation"]
    assert summary["features"] == chosen["chosen"] == "tfidf"
    assert chosen["validation_utility"]["tfidf"] > chosen["validation_utility"]["embedded"]
    assert load_router(folder).info["representation"] == chosen  # recorded in the router's files


def test_the_conductor_prompt_tells_of_votes_and_gates_where_the_step_limit_has_room():
    from stiva_tui.conductor.base import PlanRequest, WorkerInfo
    from stiva_tui.conductor.prompt import conductor_messages

    def system(limit):
        return conductor_messages(PlanRequest("Q?", [WorkerInfo("a", "")], max_steps=limit))[0]["content"]

    assert '"stop if they agree"' in system(5) and '"vote"' in system(3)
    assert "stop if they agree" not in system(2)  # a cascade needs three calls
    # the example it gives is a plan that parses as a cascade
    example = 'model_id = [0, 1, 0, 2]\nsubtasks = ["Answer the question.", "Answer the question.", "stop if they agree", "Answer the question."]\naccess_list = [[], [], [0, 1], []]'
    assert parse_workflow(example, pool_size=3, max_steps=3).shape() == "cascade"
