"""A router level that does not beat the best fixed workflow on validation runs that workflow (issue 57):
the router's files record which, the decision says "fixed workflow: ...", and `stiva bench` replays it."""

from __future__ import annotations

import hashlib
import json

import pytest


def _no_signal(path, count: int = 80):
    """Questions that say nothing about which models get them right: on a hashed half of them the two
    cheap models agree and are right, on the other half they disagree and are wrong; `dear` is right
    on all at 100 times their cost. So the agreement cascade cheap1+cheap2>dear is right on all, at
    about half the dear model's cost, and no choice per question can do better."""
    rows = []
    for n in range(count):
        easy = hashlib.sha256(str(n).encode()).digest()[0] % 2 == 0
        answer = str(1000 + n)
        said = {"cheap1": answer if easy else "1", "cheap2": answer if easy else "2", "dear": answer}
        for model, value in said.items():
            rows.append(
                {"id": f"q-{n}", "question": f"Question {n}: what is the code number?", "model": model,
                 "response": f"The answer is {value}.", "correct": value == answer, "answer": answer,
                 "split": "heldout" if n % 4 == 0 else "train", "cost_usd": 0.1 if model == "dear" else 0.001}
            )  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@pytest.fixture
def trained(tmp_path, capsys):
    from stiva_tui.cli.main import main

    def run(*args):
        code = main(list(args))
        out, err = capsys.readouterr()
        assert code == 0, err
        return json.loads(out)

    imported = run("bench", "import", str(_no_signal(tmp_path / "r.jsonl")), "--json")
    folder = tmp_path / "router"
    run("train", "router", imported["suite"], "--split", "train", "--pool", f"replay:{imported['bench']}",
        "--out", str(folder), "--json")  # fmt: skip
    return run, imported, folder


POOL = ["replay:cheap1", "replay:cheap2", "replay:dear"]


def test_a_level_the_router_does_not_beat_runs_the_fixed_workflow_and_says_so(trained):
    from stiva_tui.conductor.router import load_router
    from stiva_tui.core.preference import LEVELS

    run, imported, folder = trained
    fixed = {e["level"]: e for e in json.loads((folder / "router.json").read_text())["workflows"]["fixed"]}
    assert {"best", "balanced", "cheap", "0.1", "0.2"} <= set(fixed)
    best = fixed["best"]
    assert best["workflow"] == "cascade:cheap1+cheap2>dear" and best["runs"] == "fixed"
    assert best["validation_fixed"]["accuracy"] == 1.0 >= best["validation_router"]["accuracy"]

    decision = load_router(folder).decide_workflow("Question 3: what is the code number?", POOL, LEVELS["best"])
    assert decision.fixed and decision.name == "cascade:replay:cheap1+replay:cheap2>replay:dear"
    assert decision.line().startswith("router: fixed workflow: cascade replay:cheap1+replay:cheap2>replay:dear (")

    # the bench's row of the router at `best` is the fixed cascade's, item by item
    cascade = "cascade:replay:cheap1+replay:cheap2>replay:dear"
    report = run(
        "bench", imported["suite"], "--split", "heldout", "--pool", f"replay:{imported['bench']}",
        "--systems", f"{cascade},router:{folder}", "--json",
    )  # fmt: skip
    rows = {row["system"]: row for row in report["systems"]}
    assert rows[f"router:{folder}"]["accuracy"] == rows[cascade]["accuracy"] == 1.0
    assert rows[f"router:{folder}"]["cost_per_question"] == pytest.approx(rows[cascade]["cost_per_question"])


def test_where_the_router_runs_it_chooses_per_question(trained):
    from stiva_tui.conductor.router import load_router
    from stiva_tui.core.preference import LEVELS

    _, _, folder = trained
    path = folder / "router.json"
    data = json.loads(path.read_text())
    for entry in data["workflows"]["fixed"]:
        entry["runs"] = "router"
    path.write_text(json.dumps(data))
    decision = load_router(folder).decide_workflow("Question 3: what is the code number?", POOL, LEVELS["best"])
    assert not decision.fixed and "fixed workflow" not in decision.line()
    assert decision.line().startswith("router: ")


def test_a_fixed_workflow_the_pool_cannot_run_leaves_the_choice_to_the_router(trained):
    from stiva_tui.conductor.router import load_router
    from stiva_tui.core.preference import LEVELS

    _, _, folder = trained
    decision = load_router(folder).decide_workflow("Question 3?", ["replay:cheap1", "replay:dear"], LEVELS["best"])
    assert not decision.fixed and "cheap2" not in decision.name


def test_a_damaged_fixed_list_is_one_line(trained):
    from stiva_tui.conductor.router import RouterError, load_router

    _, _, folder = trained
    path = folder / "router.json"
    data = json.loads(path.read_text())
    data["workflows"]["fixed"] = "cascade"
    path.write_text(json.dumps(data))
    with pytest.raises(RouterError, match="workflow choice is damaged"):
        load_router(folder)


def test_the_validation_draw_is_a_hash_of_seed_and_id():
    from stiva_tui.train.workflow_router import _draw

    assert _draw(0, "gsm/1") == _draw(0, "gsm/1") != _draw(1, "gsm/1")


def test_the_routers_computed_votes_judge_only_where_the_step_limit_leaves_room():
    """A vote with one readable answer calls a judge in a run only where `max_steps` leaves room;
    the outcomes the router learns from (train/workflow_router.py) follow the same limit, so a
    `cascade:a+b>vote:c+d+e` under the default limit of 5 is learnt as the bench runs it."""
    from stiva_tui.core.answers import final_answer
    from stiva_tui.train.router import Labels
    from stiva_tui.train.workflow_router import _candidate, outcomes

    # c is right but wrote no final answer; d wrote a wrong one; e none: one readable answer
    finals = {"a": "1", "b": "2", "c": None, "d": "9", "e": None}
    scores = {"a": 0.0, "b": 0.0, "c": 1.0, "d": 0.0, "e": 0.0}
    models = list(finals)

    def labels(max_calls):
        return Labels(
            items=[("q", "question?")],
            models=models,
            scores={m: [scores[m]] for m in models},
            cost={m: 0.001 for m in models},
            latency={m: 1.0 for m in models},
            source="test",
            finals={m: [final_answer(finals[m], "number") if finals[m] else None] for m in models},
            costs={m: [0.001] for m in models},
            latencies={m: [1.0] for m in models},
            max_calls=max_calls,
        )

    candidate = _candidate("cascade:a+b>vote:c+d+e")
    right, cost, _ = outcomes(labels(5), [candidate], [0])
    assert (float(right[0, 0]), round(float(cost[0, 0]), 6)) == (0.0, 0.005)  # no room: d's readable answer
    right, cost, _ = outcomes(labels(None), [candidate], [0])
    assert (float(right[0, 0]), round(float(cost[0, 0]), 6)) == (1.0, 0.006)  # judged by c, a sixth call
