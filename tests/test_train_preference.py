"""One adapter follows every preference: `stiva train --prefer-levels best,cheap` (issue: the
conductor follows each question's cost and latency preference).

Two simulated models served by the real simulated pool's HTTP server: `cheap` is right on 30% of
the questions for 1/30 of the price, `dear` is always right. Each question's plans are sampled under
a preference drawn for it and stated in its prompt, and rewarded by that preference's weights: under
`best` the dear model earns more, under `cheap` the cheap one does. A small random-weight model
learns to pick by the preference it is told; a constant pick is right on half the held-out plans, so
passing needs the model to read the preference."""

from __future__ import annotations

import json
import random

import pytest

from model_builders import build_random_model
from stiva_tui.bench.suite import parse_suite
from stiva_tui.config import parse_config
from stiva_tui.sim.profiles import SimModel
from stiva_tui.sim.server import SimServer

PRICES = {"cheap": (0.1, 0.4), "dear": (3.0, 15.0)}


def items():
    rng = random.Random(5)
    rows = []
    for i in range(24):
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        rows.append({"id": f"q{i}", "question": f"Compute {a} times {b}.", "answer": str(a * b), "grader": "numeric",
                     "meta": {"domain": "math", "split": "train" if i < 16 else "heldout"}})
    suite = parse_suite("\n".join(json.dumps(r) for r in rows), name="prefs")
    train = parse_suite("\n".join(json.dumps(r) for r in rows if r["meta"]["split"] == "train"), name="prefs:train")
    return suite, train, [item for item in suite.items if item.meta["split"] == "heldout"]


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    corpus = [f"Compute {a} times {b}." for a in range(2, 40) for b in (3, 7)]
    corpus += ["Plan for prefer cheap, at most 1 step:", "Plan for prefer best, at most 1 step:", "Models: 0 cheap ($0.1/$0.4, latency unknown); 1 dear ($3/$15, "
               "latency unknown)"] * 20
    return build_random_model(tmp_path_factory.mktemp("prefs") / "model", "tiny", seed=4, corpus=corpus * 4)


def picks_as_told(model_dir, adapter, held, workers) -> dict[str, float]:
    """The share of held-out plans that pick the model each preference should: dear under best,
    cheap under cheap."""
    import torch

    from stiva_tui.conductor.base import PlanRequest
    from stiva_tui.conductor.local import HFConductor
    from stiva_tui.core.preference import parse_preference
    from stiva_tui.inference.checkpoints import ModelSpec

    conductor = HFConductor(ModelSpec(str(model_dir), device="cpu", adapter=adapter, quantize=False,
                                      compute_dtype="float32", label="prefs"),
                            max_reasoning_tokens=0, max_subtask_chars=4, temperature=1.0, prompt_style="compact")
    loaded = conductor.load_sync()
    torch.manual_seed(13)
    share = {}
    for level, wanted in (("best", 1), ("cheap", 0)):
        right = total = 0
        for item in held:
            request = PlanRequest(item.question, workers, max_steps=1, preference=parse_preference(level))
            for plan in conductor.sample_many_sync(request, loaded, 4, 1.0):
                assert plan.workflow is not None
                right += plan.workflow.steps[0].model == wanted
                total += 1
        share[level] = right / total
    return share


def test_one_adapter_learns_to_follow_the_preference_it_is_told(small_model, tmp_path, stiva_home):
    from stiva_tui.conductor.base import WorkerInfo
    from stiva_tui.train.trainer import TrainOptions, train

    suite, train_suite, held = items()
    models = [SimModel("cheap", {"math": 0.3}, *PRICES["cheap"], latency_s=0.0, words=0),
              SimModel("dear", {"math": 1.0}, *PRICES["dear"], latency_s=0.0, words=0)]
    with SimServer(models, suite.items, latency_scale=0.0) as server:
        config = parse_config({
            "providers": [{"name": "sim", "base_url": server.base_url}],
            "models": [{"id": m.name, "provider": "sim", "model": m.name, "price_in": m.price_in,
                        "price_out": m.price_out} for m in models],
            "catalog": False, "embedded_worker": False, "discovery": {"enabled": False}, "workers": {"retries": 0},
            "conductor": {"max_steps": 1, "max_reasoning_tokens": 0, "max_subtask_chars": 20},
        })
        workers = [WorkerInfo(m.name, "", price_in=m.price_in, price_out=m.price_out) for m in models]
        before = picks_as_told(small_model, None, held, workers)
        out = tmp_path / "adapter"
        options = TrainOptions(base=str(small_model), out=out, steps=60, group=4, batch=4, lr=5e-3, device="cpu",
                               seed=0, save_every=100, lora_r=8, lora_targets="all", prompt_style="compact",
                               max_subtask_chars=4, preferences=("best", "cheap"))
        summary = train(config, train_suite, options)
        assert summary.steps == 60
        assert json.loads((out / "stiva_adapter.json").read_text())["preferences"] == ["best", "cheap"]
        after = picks_as_told(small_model, str(out), held, workers)
    # untrained, the two levels cannot both be followed: what one gets right the other gets wrong
    print("before", before, "after", after)
    assert before["best"] + before["cheap"] < 1.4, before
    assert after["best"] >= 0.8 and after["cheap"] >= 0.8, (before, after)


def test_a_bad_level_or_a_cost_weight_beside_levels_is_refused_before_anything_loads(tmp_path):
    from stiva_tui.train.trainer import TrainError, TrainOptions, train

    config = parse_config({"catalog": False, "embedded_worker": False, "discovery": {"enabled": False}})
    suite, train_suite, _ = items()
    with pytest.raises(TrainError, match="--prefer-levels: preference 'cheapest'"):
        train(config, train_suite, TrainOptions(base="embedded", out=tmp_path / "a", preferences=("cheapest",)))
    with pytest.raises(TrainError, match="replaces --cost-weight"):
        train(config, train_suite, TrainOptions(base="embedded", out=tmp_path / "a", preferences=("cheap",),
                                                cost_weight=0.5))
    assert not (tmp_path / "a").exists()
