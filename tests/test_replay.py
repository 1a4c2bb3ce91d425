"""`--pool replay:BENCH_ID`: a real bench's recorded answers served as a pool, for benches and for
training rollouts; and the rollouts' per-provider concurrency cap (issue: the paper's result in
miniature, point 4). The recorded bench is made by the real `stiva bench` on the real scripted HTTP
provider; the replay is served over HTTP by Stiva's own server."""

from __future__ import annotations

import json

import pytest
from test_bench_runner import script_pool, write_config, write_suite

from stiva_tui.bench.replay import start_pool
from stiva_tui.config import load_config, parse_config
from stiva_tui.evals.loaders import load_suite
from stiva_tui.sim.pool import pool_config
from tests.support.cli import run_stiva
from tests.support.fakeprovider import Reply
from tests.support.train import StubTrainer


def recorded_bench(fake, tmp_path, home, n: int = 4) -> tuple[str, object, object]:
    """(bench id, config path, suite path) of a real bench of direct:right and direct:wrong."""
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", n)
    done = run_stiva(
        "bench", str(suite), "--systems", "direct:right,direct:wrong", "--config", str(config), "--json", home=home
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["bench_id"], config, suite


def test_a_replayed_bench_gives_back_each_models_recorded_answers_without_a_call(fake, tmp_path, stiva_home):
    bench_id, config, suite = recorded_bench(fake, tmp_path, stiva_home)
    asked = len(fake.requests)
    replay = run_stiva(
        "bench",
        str(suite),
        "--pool",
        f"replay:{bench_id[:6]}",
        "--systems",
        "direct:*",
        "--config",
        str(config),
        "--json",
        home=stiva_home,
    )
    assert replay.returncode == 0, replay.stderr
    assert len(fake.requests) == asked  # the provider is not called again
    report = json.loads(replay.stdout)
    assert report["pool"] == f"recorded pool (bench {bench_id})"
    rows = {row["system"]: row for row in report["systems"]}
    assert set(rows) == {"direct:replay:right", "direct:replay:wrong"}
    assert (rows["direct:replay:right"]["accuracy"], rows["direct:replay:wrong"]["accuracy"]) == (1.0, 0.0)
    answers = {(i["system"], i["id"]): i["answer"] for i in report["items"]}
    assert answers["direct:replay:wrong", "add-2"] == "The sum is 7."  # the recorded text, as it was
    # the recorded completion tokens; each model's price is its recorded cost per token
    assert {i["completion_tokens"] for i in report["items"] if i["system"] == "direct:replay:right"} == {2}
    assert rows["direct:replay:wrong"]["cost_per_question"] > rows["direct:replay:right"]["cost_per_question"] > 0
    markdown = (stiva_home / "data" / "bench" / report["bench_id"] / "report.md").read_text()
    assert f"**RECORDED POOL (bench {bench_id}):** every answer here is a real model's answer" in markdown
    listing = run_stiva("models", "--pool", f"replay:{bench_id}", "--config", str(config), home=stiva_home)
    assert listing.returncode == 0, listing.stderr
    assert "replay:right" in listing.stdout and "replay:wrong" in listing.stdout


def test_bad_replays_are_one_line_usage_errors(fake, tmp_path, stiva_home):
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 2)
    planned = run_stiva(
        "bench", str(suite), "--systems", "conductor", "--config", str(config), "--json", home=stiva_home
    )
    assert planned.returncode == 0, planned.stderr
    conductor_only = json.loads(planned.stdout)["bench_id"]
    for pool, message in (
        ("replay:ab", "4 characters or more"),
        ("replay:abcdef", "no bench abcdef"),
        (f"replay:{conductor_only}", "no graded direct: answers"),
        ("nope", "use sim, sim:SEED or replay"),
    ):
        result = run_stiva(
            "bench", str(suite), "--pool", pool, "--systems", "direct:*", "--config", str(config), home=stiva_home
        )
        assert result.returncode == 2, (pool, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, (pool, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


class NamesConductor:
    """Plans one step on model 0, then 1, then 0, ... of the list it is shown."""

    spec = None

    def sample_many_sync(self, request, loaded, n, temperature):
        from stiva_tui.conductor.local import SampledPlan
        from stiva_tui.core.workflow import Step, Workflow

        return [
            SampledPlan([1], [2], [-0.5], f"model_id = [{i % 2}]", Workflow((Step(i % 2, "Answer it.", ()),)))
            for i in range(n)
        ]


def test_training_rollouts_on_a_replayed_bench_reward_the_model_that_was_right(fake, tmp_path, stiva_home):
    """What `stiva train SUITE --pool replay:ID` runs: each plan's run on the replayed answers,
    graded; the recorded right model's plans earn 1, the wrong one's 0.5, and no provider is called."""
    from stiva_tui.train.rollout import EngineLoop, Rollouts

    bench_id, config_path, suite_path = recorded_bench(fake, tmp_path, stiva_home)
    asked = len(fake.requests)
    config, server = start_pool(pool_config(load_config(config_path), f"replay:{bench_id}"))
    try:
        engine = EngineLoop(config, discover=False)
        try:
            items = load_suite(str(suite_path)).items
            rollouts = Rollouts(engine, NamesConductor(), items, tokenizer=None, cache_path=tmp_path / "r.jsonl")
            assert [m.id for m in rollouts.models] == ["replay:right", "replay:wrong"]
            out = rollouts([item.id for item in items for _ in range(2)], StubTrainer)
        finally:
            engine.close()
    finally:
        server.stop()
    assert out["stiva_reward"] == [1.0, 0.5] * len(items)
    assert len(fake.requests) == asked


@pytest.mark.parametrize("cap", [2, 8])
def test_rollouts_send_each_provider_at_most_the_cap_at_once(fake, tmp_path, stiva_home, cap):
    """`--rollout-concurrency N`: 8 plans of one step reach the provider at most N at a time."""
    from stiva_tui.train.rollout import EngineLoop, Rollouts

    latency = 0.4
    fake.default("a", Reply("The sum is 3.", usage=(5, 2), latency_s=latency))
    fake.default("b", Reply("The sum is 3.", usage=(5, 2), latency_s=latency))
    config = parse_config(
        {
            "providers": [{"name": "lab", "base_url": fake.base_url}],
            "models": [{"id": name, "provider": "lab", "model": name} for name in ("a", "b")],
            "catalog": False,
            "embedded_worker": False,
            "discovery": {"enabled": False},
            "workers": {"retries": 0},
        }
    )
    suite = load_suite(str(write_suite(tmp_path / "s.jsonl", 8)))
    engine = EngineLoop(config, discover=False, concurrency=cap)  # the answer cache off: every call is asked
    try:
        rollouts = Rollouts(engine, NamesConductor(), suite.items, tokenizer=None, cache_path=tmp_path / "r.jsonl")
        rollouts([item.id for item in suite.items], StubTrainer)
    finally:
        engine.close()
    arrivals = sorted(r.at for r in fake.requests)
    assert len(arrivals) == 8
    # with at most `cap` in flight, call i + cap can only start once call i has taken its latency
    gaps = [arrivals[i + cap] - arrivals[i] for i in range(len(arrivals) - cap)]
    if cap == 2:
        assert min(gaps) >= latency * 0.9, gaps
    else:  # all 8 at once: no call waited for another
        assert arrivals[-1] - arrivals[0] < latency * 0.9, arrivals
