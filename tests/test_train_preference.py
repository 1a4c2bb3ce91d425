"""`stiva train --prefer-levels`: each question's plans are told one drawn preference and rewarded
by its weights, so that one adapter can learn every level (issue: the conductor follows each
question's cost and latency preference).

Whether a model learns to follow the level it is told is not shown yet: a tiny random-weight model
trained 40-60 GRPO steps on the setting below (and on two others) drifted to one model under every
level instead of reading the level (see the closing note of the session that built this).

The setting: two simulated models served by the real simulated pool's HTTP server, both always
right; `cheap` costs 1/30 of `dear` but is slower. Under `cheap` the cheap model's plans must earn
more, under `fast` the quick one's."""

from __future__ import annotations

import json
import random

import pytest

from stiva_tui.config import parse_config
from stiva_tui.evals.suite import parse_suite
from stiva_tui.sim.profiles import SimModel
from stiva_tui.sim.server import SimServer
from tests.support.train import StubTrainer

PRICES = {"cheap": (0.1, 0.4), "dear": (3.0, 15.0)}


def items():
    rng = random.Random(5)
    rows = []
    for i in range(24):
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        rows.append(
            {
                "id": f"q{i}",
                "question": f"Compute {a} times {b}.",
                "answer": str(a * b),
                "grader": "numeric",
                "meta": {"domain": "math", "split": "train" if i < 16 else "heldout"},
            }
        )
    suite = parse_suite("\n".join(json.dumps(r) for r in rows), name="prefs")
    train = parse_suite("\n".join(json.dumps(r) for r in rows if r["meta"]["split"] == "train"), name="prefs:train")
    return suite, train, [item for item in suite.items if item.meta["split"] == "heldout"]


def test_a_bad_level_or_a_cost_weight_beside_levels_is_refused_before_anything_loads(tmp_path):
    from stiva_tui.train.trainer import TrainError, TrainOptions, train

    config = parse_config({"catalog": False, "embedded_worker": False, "discovery": {"enabled": False}})
    suite, train_suite, _ = items()
    with pytest.raises(TrainError, match="--prefer-levels: preference 'cheapest'"):
        train(config, train_suite, TrainOptions(base="embedded", out=tmp_path / "a", preferences=("cheapest",)))
    with pytest.raises(TrainError, match="replaces --cost-weight"):
        train(
            config,
            train_suite,
            TrainOptions(base="embedded", out=tmp_path / "a", preferences=("cheap",), cost_weight=0.5),
        )
    assert not (tmp_path / "a").exists()


class EveryModelConductor:
    """Names model 0, then 1, then 0, ... of the list it is shown, and keeps every prompt it saw."""

    spec = None

    def __init__(self):
        self.requests = []

    def sample_many_sync(self, request, loaded, n, temperature):
        from stiva_tui.conductor.local import SampledPlan
        from stiva_tui.core.workflow import Step, Workflow

        self.requests.append(request)
        return [
            SampledPlan([1], [2], [-0.5], f"model_id = [{i % 2}]", Workflow((Step(i % 2, "Answer.", ()),)))
            for i in range(n)
        ]


def test_each_questions_plans_are_told_one_drawn_preference_and_rewarded_by_it(tmp_path, stiva_home):
    """The rollout: one preference drawn per question, stated in its plans' prompt, and the reward of
    each plan by that preference's weights over real runs on the simulated pool."""
    from stiva_tui.core.preference import LEVELS
    from stiva_tui.train.rollout import EngineLoop, Rollouts

    suite, train_suite, _ = items()
    models = [
        SimModel("cheap", {"math": 1.0}, *PRICES["cheap"], latency_s=0.4, words=0),
        SimModel("dear", {"math": 1.0}, *PRICES["dear"], latency_s=0.0, words=0),
    ]
    with SimServer(models, suite.items, latency_scale=1.0) as server:
        config = parse_config(
            {
                "providers": [{"name": "sim", "base_url": server.base_url}],
                "models": [
                    {"id": m.name, "provider": "sim", "model": m.name, "price_in": m.price_in, "price_out": m.price_out}
                    for m in models
                ],
                "catalog": False,
                "embedded_worker": False,
                "discovery": {"enabled": False},
                "workers": {"retries": 0},
            }
        )
        engine = EngineLoop(config, discover=False)
        try:
            conductor = EveryModelConductor()
            rollouts = Rollouts(
                engine,
                conductor,
                train_suite.items,
                tokenizer=None,
                cache_path=tmp_path / "c.jsonl",
                preferences=(LEVELS["cheap"], LEVELS["fast"]),
                seed=3,
            )

            ids = [item.id for item in train_suite.items[:6] for _ in range(4)]
            out = rollouts(ids, StubTrainer)
        finally:
            engine.close()
    told = [r.preference.name for r in conductor.requests]
    assert set(told) == {"cheap", "fast"}, told  # drawn per question, both drawn in six questions
    assert all(r.workers[1].price_in == 3.0 for r in conductor.requests)  # the prompt knows the prices
    rewards = out["stiva_reward"]
    for q, level in enumerate(told):
        cheap_plans = rewards[4 * q : 4 * q + 4 : 2]  # plans 0 and 2 named the cheap model, 1 and 3 the dear one
        dear_plans = rewards[4 * q + 1 : 4 * q + 4 : 2]
        if level == "cheap":
            assert min(cheap_plans) > max(dear_plans), (level, rewards[4 * q : 4 * q + 4])
        else:  # fast: the quick (dear) model earns more
            assert min(dear_plans) > max(cheap_plans), (level, rewards[4 * q : 4 * q + 4])
