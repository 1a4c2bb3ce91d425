"""The conductor learns to route by the question (issue: a pool whose strengths are known).

Two simulated models, each right only on its own domain, served by the real simulated pool's HTTP
server; a small random-weight model learns with `stiva train` (GRPO + LoRA) to send each domain's
held-out questions to its model. A constant pick routes half of them right, so passing needs the
model to read the question."""

from __future__ import annotations

import json
import random

import pytest

from stiva_tui.config import parse_config
from stiva_tui.evals.suite import parse_suite
from stiva_tui.sim.profiles import SimModel
from stiva_tui.sim.server import SimServer
from tests.support.model_builders import build_random_model
from tests.support.pool import sim_pool_config
from tests.support.train import StubTrainer

COUNTRIES = [
    "France",
    "Japan",
    "Canada",
    "Peru",
    "Spain",
    "Italy",
    "Kenya",
    "Norway",
    "Chile",
    "Egypt",
    "India",
    "Ghana",
    "Nepal",
    "Cuba",
    "Iran",
    "Laos",
    "Mali",
    "Oman",
    "Chad",
    "Fiji",
]


def routing_items():
    """(train, held-out) items: arithmetic (`alpha` is always right there) and geography (`beta`)."""
    rng = random.Random(7)
    rows = []
    for i in range(20):
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        rows.append(
            {
                "id": f"math-{i}",
                "question": f"Compute {a} times {b}.",
                "answer": str(a * b),
                "grader": "numeric",
                "meta": {"domain": "math", "split": "train" if i < 12 else "heldout"},
            }
        )
        rows.append(
            {
                "id": f"geo-{i}",
                "question": f"Which city is the capital of {COUNTRIES[i]}?",
                "answer": "City",
                "grader": "contains",
                "meta": {"domain": "geo", "split": "train" if i < 12 else "heldout"},
            }
        )
    suite = parse_suite("\n".join(json.dumps(r) for r in rows), name="routing")
    train = parse_suite("\n".join(json.dumps(r) for r in rows if r["meta"]["split"] == "train"), name="routing:train")
    held = [item for item in suite.items if item.meta["split"] == "heldout"]
    return suite, train, held


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    corpus = [f"Compute {a} times {b}." for a in range(2, 40) for b in (3, 7)]
    corpus += [f"Which city is the capital of {c}?" for c in COUNTRIES]
    return build_random_model(tmp_path_factory.mktemp("router") / "model", "tiny", seed=3, corpus=corpus * 4)


def routed_right(model_dir, adapter, held, workers, prompt_style="auto") -> float:
    import torch

    from stiva_tui.conductor.base import PlanRequest
    from stiva_tui.conductor.local import HFConductor
    from stiva_tui.inference.checkpoints import ModelSpec

    conductor = HFConductor(
        ModelSpec(
            str(model_dir), device="cpu", adapter=adapter, quantize=False, compute_dtype="float32", label="router"
        ),
        max_reasoning_tokens=0,
        max_subtask_chars=4,
        temperature=1.0,
        prompt_style=prompt_style,
    )
    loaded = conductor.load_sync()
    torch.manual_seed(11)
    right = total = 0
    for item in held:
        for plan in conductor.sample_many_sync(PlanRequest(item.question, workers, max_steps=1), loaded, 4, 1.0):
            assert plan.workflow is not None
            right += plan.workflow.steps[0].model == (0 if item.meta["domain"] == "math" else 1)
            total += 1
    return right / total


@pytest.mark.slow
def test_the_conductor_learns_to_send_each_domain_to_its_model(small_model, tmp_path, stiva_home):
    from stiva_tui.conductor.base import WorkerInfo
    from stiva_tui.train.trainer import TrainOptions, train

    suite, train_suite, held = routing_items()
    models = [
        SimModel("alpha", {"math": 1.0, "geo": 0.0}, latency_s=0.0, words=0),
        SimModel("beta", {"math": 0.0, "geo": 1.0}, latency_s=0.0, words=0),
    ]
    with SimServer(models, suite.items, latency_scale=0.0) as server:
        config = sim_pool_config(server.base_url, [m.name for m in models])
        workers = [WorkerInfo("alpha", ""), WorkerInfo("beta", "")]
        before = routed_right(small_model, None, held, workers, "compact")
        out = tmp_path / "adapter"
        # the compact prompt (~60 tokens, not ~1,300), LoRA on every linear layer, short subtasks
        options = TrainOptions(
            base=str(small_model),
            out=out,
            steps=40,
            group=4,
            batch=4,
            lr=5e-3,
            device="cpu",
            seed=0,
            save_every=100,
            lora_r=8,
            lora_targets="all",
            prompt_style="compact",
            max_subtask_chars=4,
            max_steps_per_plan=1,
        )
        summary = train(config, train_suite, options)
        assert summary.steps == 40
        marker = json.loads((out / "stiva_adapter.json").read_text())
        assert (marker["prompt_style"], marker["max_steps_per_plan"]) == ("compact", 1)
        after = routed_right(small_model, str(out), held, workers)  # the adapter brings its prompt style
    assert before < 0.6, before
    assert after >= 0.8, (before, after)


class FirstModelConductor:
    """A conductor that always names model 0 of the list it is shown (what the embedded model did on
    the simulated pool: 52 of 56 rollouts on the first model, so GRPO's groups had nothing to compare)."""

    spec = None

    def __init__(self):
        self.shown: list[list[str]] = []

    def sample_many_sync(self, request, loaded, n, temperature):
        from stiva_tui.conductor.local import SampledPlan
        from stiva_tui.core.workflow import Step, Workflow

        self.shown += [[w.id for w in request.workers]] * n
        workflow = Workflow((Step(0, "Answer the question.", ()),))
        return [SampledPlan([1, 2], [3, 4], [-0.5, -0.1], "model_id = [0]", workflow) for _ in range(n)]


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_shuffled_pool_makes_a_first_model_conductor_try_every_model(shuffle, tmp_path, stiva_home):
    from stiva_tui.train.rollout import EngineLoop, Rollouts

    suite, train_suite, _ = routing_items()
    models = [SimModel(name, {}, latency_s=0.0, words=0) for name in ("alpha", "beta", "gamma")]
    with SimServer(models, suite.items, latency_scale=0.0) as server:
        config = parse_config(
            {
                "providers": [{"name": "sim", "base_url": server.base_url}],
                "models": [{"id": m.name, "provider": "sim", "model": m.name} for m in models],
                "catalog": False,
                "embedded_worker": False,
                "discovery": {"enabled": False},
                "workers": {"retries": 0},
            }
        )
        engine = EngineLoop(config, discover=False)
        try:
            conductor = FirstModelConductor()
            rollouts = Rollouts(
                engine,
                conductor,
                train_suite.items,
                tokenizer=None,
                cache_path=tmp_path / "c.jsonl",
                shuffle_pool=shuffle,
                seed=1,
            )

            ids = [item.id for item in train_suite.items[:4] for _ in range(6)]
            rollouts(ids, StubTrainer)
            picks = rollouts.take_stats().picks
        finally:
            engine.close()
    # each run went to the model the plan named in the list it was shown
    answered = [name for name, _ in server.answers]
    assert sorted(answered) == sorted(shown[0] for shown in conductor.shown)  # (the runs are concurrent)
    if shuffle:
        assert len(picks) == 3 and min(picks.values()) >= 3, picks
        assert len({tuple(s) for s in conductor.shown}) > 1
    else:
        assert picks == {"alpha": 24}, picks
