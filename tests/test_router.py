"""The one-pass router (`stiva train router`, systems `router:DIR[@LEVEL]`, `[conductor] router`):
trained on a recorded pool where each model is right on its own kind of question, it sends held-out
questions of each kind to that model, weighs cost under a preference, never picks a model it was
not trained on, and conductor-mini routes with it in `stiva ask`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from stiva_tui.cli.main import main
from stiva_tui.conductor.router import RouterError, load_router
from stiva_tui.core.preference import parse_preference

CAPITALS = ["France", "Peru", "Japan", "Kenya", "Chile", "Spain", "Egypt", "Norway", "Canada", "India", "Brazil",
            "Italy", "Ghana", "Nepal", "Cuba", "Iran", "Laos", "Mali", "Oman", "Fiji", "Chad", "Togo", "Iraq",
            "Greece", "Poland", "Sweden", "Mexico", "Turkey", "Vietnam", "Austria"]  # fmt: skip


def recorded_pool(tmp_path: Path) -> Path:
    """60 items: sums, which `math` gets right and `geo` wrong, and capitals, the other way round;
    `dear` is right on all of them at 100 times the cost of the others."""
    rng = random.Random(7)
    rows = []
    for n in range(30):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        rows.append((f"sum-{n}", f"What is {a} plus {b}? Add the two numbers.", "math"))
        rows.append((f"cap-{n}", f"What is the capital city of {CAPITALS[n]}?", "geo"))
    records = []
    for item_id, question, kind in rows:
        for model, cost in (("math", 0.001), ("geo", 0.001), ("dear", 0.1)):
            right = model == "dear" or model == kind
            split = "heldout" if int(item_id.split("-")[1]) % 3 == 0 else "train"
            records.append(
                {"id": item_id, "question": question, "model": model, "response": f"{model}: {item_id}",
                 "correct": right, "cost_usd": cost, "split": split}
            )  # fmt: skip
    path = tmp_path / "pool.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def trained(tmp_path, capsys):
    code, out, err = run(capsys, "bench", "import", str(recorded_pool(tmp_path)), "--json")
    assert code == 0, err
    imported = json.loads(out)
    folder = tmp_path / "router"
    code, out, err = run(
        capsys, "train", "router", imported["suite"], "--split", "train", "--pool", f"replay:{imported['bench']}",
        "--features", "tfidf", "--out", str(folder), "--json",
    )  # fmt: skip
    assert code == 0, err
    return imported, folder, json.loads(out)


def test_the_router_sends_each_kind_of_held_out_question_to_the_model_right_on_it(trained, capsys):
    imported, folder, summary = trained
    assert summary["models"] == ["math", "geo", "dear"] and summary["items"] == 40
    code, out, err = run(
        capsys, "bench", imported["suite"], "--split", "heldout", "--pool", f"replay:{imported['bench']}",
        "--systems", f"router:{folder},router:{folder}@cheap,direct:*", "--json",
    )  # fmt: skip
    assert code == 0, err
    rows = {row["system"]: row for row in json.loads(out)["systems"]}
    assert rows["direct:replay:math"]["accuracy"] == 0.5 and rows["direct:replay:geo"]["accuracy"] == 0.5
    # at `best` every model's chance counts alone: `dear` (right on all) or the specialist, all right
    assert rows[f"router:{folder}"]["accuracy"] == 1.0
    # `cheap`: the specialist, as right as `dear` at a hundredth of its cost
    cheap = rows[f"router:{folder}@cheap"]
    assert cheap["accuracy"] == 1.0
    assert cheap["cost_per_question"] < rows["direct:replay:dear"]["cost_per_question"] / 10


def test_a_decision_names_the_pick_its_chance_and_the_runner_up_and_never_an_untrained_model(trained):
    _, folder, _ = trained
    router = load_router(folder)
    pool = ["replay:math", "replay:geo", "replay:dear", "replay:newcomer"]
    decision = router.decide("What is the capital city of Portugal?", pool, parse_preference("cheap"))
    assert decision.model == "replay:geo"
    assert decision.runner_up is not None and decision.runner_up != decision.model
    assert decision.untrained == ("replay:newcomer",)
    assert "newcomer" not in decision.chances
    line = decision.line()
    assert line.startswith("router: replay:geo (") and "runner-up" in line and "not trained on replay:newcomer" in line
    sums = router.decide("What is 31 plus 45? Add the two numbers.", pool, parse_preference("cheap"))
    assert sums.model == "replay:math"
    with pytest.raises(RouterError, match="none of them is in the pool"):
        router.decide("anything", ["openai/gpt-5"])


def test_conductor_mini_routes_with_the_configured_router_in_stiva_ask(trained, tmp_path, capsys):
    imported, folder, _ = trained
    config = tmp_path / "config.toml"
    config.write_text(f'[conductor]\nrouter = "{folder}"\n')
    code, out, err = run(
        capsys, "--config", str(config), "--pool", f"replay:{imported['bench']}", "ask", "--preset", "conductor-mini",
        "What is the capital city of Peru?", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    text = json.dumps(result)
    # the router's pick, or the fixed workflow its level runs where the pick did not beat it on validation
    assert "router: replay:" in text or "router: fixed workflow: replay:" in text
    assert result["answer"].startswith(("geo:", "dear:"))


def test_a_folder_without_a_router_is_one_line(tmp_path, capsys):
    code, _, err = run(capsys, "bench", "basic", "--pool", "sim", "--systems", f"router:{tmp_path}", "--limit", "1")
    assert code == 2 and "holds no router (no router.json)" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "router.json").write_text("{}")
    with pytest.raises(RouterError, match="not a readable router"):
        load_router(tmp_path)


def test_the_configured_router_is_the_fallbacks_first_evidence(trained):
    """A plan the guard replaces goes to the model the router expects to be right (engine/fallback.py)."""
    from stiva_tui.engine.fallback import FallbackEvidence, choose_fallback
    from stiva_tui.runtime.root import router_predictor

    _, folder, _ = trained
    predict = router_predictor(str(folder))
    pool = ["replay:math", "replay:geo", "replay:newcomer"]
    chances = predict("What is the capital city of Portugal?", pool)
    assert set(chances) == {"replay:math", "replay:geo"} and chances["replay:geo"] > chances["replay:math"]
    assert router_predictor(str(folder / "missing"))("anything", pool) is None

    class Model:
        def __init__(self, id, price):
            self.id, self.price_in, self.price_out, self.kind, self.available, self.enabled = (
                id,
                price,
                price,
                "openai",
                True,
                True,
            )

    models = [Model("replay:math", 1.0), Model("replay:geo", 1.0), Model("replay:newcomer", 99.0)]
    chosen = choose_fallback(models, "What is the capital city of Portugal?", FallbackEvidence(predict=predict))
    assert models[chosen.index].id == "replay:geo", chosen


def test_a_low_chance_is_handed_to_the_full_conductor_and_the_plan_says_why(trained):
    """[conductor] router_escalate_below: under it, the full conductor's plan runs, after the router's reason."""
    import asyncio

    from stiva_tui.conductor.base import Plan, PlanRequest, WorkerInfo
    from stiva_tui.conductor.router import RouterConductor
    from stiva_tui.core.usage import Usage
    from stiva_tui.core.workflow import Step, Workflow

    _, folder, _ = trained
    asked = []

    class Full:
        backend = "embedded"

        async def plan(self, request, on_delta=None):
            asked.append(request.question)
            steps = (Step(0, "draft", ()), Step(1, "check the draft", (0,)))
            return Plan(Workflow(steps), "two steps", "two steps", Usage(3, 4), 0.5)

    async def full():
        return Full()

    workers = [WorkerInfo("replay:math", ""), WorkerInfo("replay:geo", ""), WorkerInfo("replay:dear", "")]
    request = PlanRequest("What is the capital city of Portugal?", workers)
    router = RouterConductor(folder)
    router.escalate = full
    router.escalate_below = 0.0  # never: the router's one step
    plan = asyncio.run(router.plan(request))
    assert len(plan.workflow.steps) == 1 and not asked
    router.escalate_below = 1.0  # always
    said = []
    plan = asyncio.run(router.plan(request, said.append))
    assert asked == [request.question] and len(plan.workflow.steps) == 2 and plan.usage == Usage(3, 4)
    assert (
        plan.reasoning.startswith("router: the best predicted chance, ")
        and "the full conductor plans" in plan.reasoning
    )
    assert said and said[0].startswith("router: the best predicted chance")


def test_conductor_mini_escalates_only_with_the_setting(trained, tmp_path):
    """The session wires escalation to conductor-mini's router, and not to a router:DIR system."""
    from types import SimpleNamespace

    from stiva_tui.conductor.router import RouterConductor
    from stiva_tui.config import load_config
    from stiva_tui.runtime.modes import ConductorMode, ConductorVariant, conductor_variant
    from stiva_tui.runtime.sessions import Sessions

    _, folder, _ = trained
    path = tmp_path / "c.toml"
    for threshold, mode, wired in (
        (0.5, ConductorMode(preset="conductor-mini"), True),
        (0.0, ConductorMode(preset="conductor-mini"), False),
        (0.5, ConductorMode(variant=ConductorVariant(backend="router", model=str(folder))), False),
    ):
        path.write_text(f'[conductor]\nrouter = "{folder}"\nrouter_escalate_below = {threshold}\n')
        config = load_config(str(path))
        sessions = Sessions(SimpleNamespace(config=config))
        loaded = RouterConductor(folder)
        conductor = sessions._escalation(loaded, conductor_variant(mode, config.conductor.router), mode, None)
        assert (conductor.escalate is not None) is wired and conductor.escalate_below == (threshold if wired else 0.0)
        # the loaded router, which a router:DIR system of the same folder shares, never escalates
        assert loaded.escalate is None and loaded.escalate_below == 0.0 and (conductor is loaded) is not wired
