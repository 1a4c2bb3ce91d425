"""`stiva train` on the CPU with real scripted HTTP providers: GRPO mechanics on the embedded model,
learning on a small model built here, the run cache, the budget, resume, adapters and their base."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess

import pytest

from stiva_tui.config import parse_config
from stiva_tui.evals.suite import parse_suite
from tests.conftest_model import embedded_loaded, model_cache  # noqa: F401 - fixtures
from tests.support.cli import STIVA
from tests.support.fakeprovider import Reply
from tests.support.model_builders import build_random_model

LOG_FIELDS = {
    "step",
    "reward_mean",
    "reward_std",
    "loss",
    "valid_plan_rate",
    "mean_plan_steps",
    "tokens",
    "cost_usd",
    "generate_s",
    "rollout_s",
    "update_s",
    "answers_reused",
}


def pool_config(fake, names, **conductor):
    return parse_config(
        {
            "providers": [{"name": "lab", "base_url": fake.base_url}],
            "models": [{"id": m, "provider": "lab", "model": m, "price_in": 1.0, "price_out": 1.0} for m in names],
            "catalog": False,
            "embedded_worker": False,
            "discovery": {"enabled": False},
            "workers": {"retries": 0},
            "conductor": conductor,
        }
    )


def suite_of(n: int):
    lines = [
        json.dumps(
            {"id": f"q{i}", "question": f"What is {i} times 6 plus {42 - 6 * i}?", "answer": "42", "grader": "numeric"}
        )
        for i in range(n)
    ]
    return parse_suite("\n".join(lines), name="t")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A small Qwen2-shaped model with random weights and a ChatML template (no hub download)."""
    return build_random_model(tmp_path_factory.mktemp("tiny") / "model", "tiny", seed=0)


def _tiny_options(out, **kwargs):
    from stiva_tui.train.trainer import TrainOptions

    values = dict(base="", out=out, steps=2, group=4, batch=2, lr=5e-3, device="cpu", seed=0, save_every=1)
    values.update(kwargs)
    return TrainOptions(**values)


# --- mechanics on the real embedded model ------------------------------------------------------------


@pytest.mark.model
def test_two_grpo_steps_on_the_embedded_model(model_cache, embedded_loaded, fake, tmp_path, stiva_home):  # noqa: F811
    import torch
    from safetensors.torch import load_file

    from stiva_tui.conductor.base import PlanRequest, WorkerInfo
    from stiva_tui.conductor.embedded import EmbeddedConductor
    from stiva_tui.core.workflow import parse_workflow
    from stiva_tui.pool.embedded import EmbeddedWorker
    from stiva_tui.train.trainer import TrainOptions, train

    # answers alternate between right and wrong, so the plans of a group earn different rewards
    # (GRPO learns nothing from a group whose rewards are all equal)
    turn = itertools.count()
    fake.default("a", lambda r: Reply("It is 42." if next(turn) % 2 else "It is 41.", usage=(10, 2)))
    fake.default("b", lambda r: Reply("It is 42." if next(turn) % 2 else "It is 40.", usage=(10, 2)))
    out = tmp_path / "adapter"
    summary = train(
        pool_config(fake, "ab"),
        suite_of(3),
        TrainOptions(base="embedded", out=out, steps=2, group=4, batch=1, lr=1e-3, device="cpu"),
    )
    assert summary.steps == 2 and summary.adapter == str(out)
    lines = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2] and all(set(line) == LOG_FIELDS for line in lines)
    assert all(math.isfinite(line["loss"]) for line in lines)
    assert all(line["valid_plan_rate"] == 1.0 for line in lines)  # the grammar holds while training
    assert any(line["reward_std"] > 0 for line in lines)
    # the adapter: PEFT's files, LoRA's B matrices moved away from their zero start
    assert (out / "adapter_config.json").exists()
    weights = load_file(str(out / "adapter_model.safetensors"))
    lora_b = [w for name, w in weights.items() if "lora_B" in name]
    assert lora_b and any(float(w.abs().max()) > 0 for w in lora_b)
    assert json.loads((out / "stiva_adapter.json").read_text())["base"] == "embedded"
    # it loads back as the embedded conductor's adapter, and its plans still parse
    import asyncio

    conductor = EmbeddedConductor(adapter=str(out))
    plan = asyncio.run(
        conductor.plan(PlanRequest("What is 7 times 6?", [WorkerInfo("a", ""), WorkerInfo("b", "")], max_steps=2))
    )
    assert parse_workflow(plan.raw_text, 2, 1) == plan.workflow
    assert conductor.describe()["adapter"] == str(out)
    from stiva_tui.conductor.choose import loaded_facts

    assert f"LoRA {out}" in loaded_facts(conductor)  # what the status bar and stiva models show
    # the embedded worker never answers through the conductor's adapter: a copy without it
    loaded = conductor.load_sync()
    worker_model = EmbeddedWorker()._load_sync()
    assert worker_model is embedded_loaded and worker_model is not loaded
    assert not hasattr(worker_model.model, "peft_config") and hasattr(loaded.model, "peft_config")
    assert torch.isfinite(torch.tensor([line["reward_mean"] for line in lines])).all()


# --- learning, on a small model built here -----------------------------------------------------------


@pytest.mark.slow
def test_the_conductor_learns_to_pick_the_model_that_is_right(tiny_model, fake, tmp_path, stiva_home):
    """One model of three is always right: after training, the plans pick it far above chance."""
    from stiva_tui.conductor.base import PlanRequest, WorkerInfo
    from stiva_tui.conductor.local import HFConductor
    from stiva_tui.inference.checkpoints import ModelSpec
    from stiva_tui.train.trainer import train

    fake.default("a", Reply("It is 41.", usage=(10, 2)))
    fake.default("b", Reply("It is 42.", usage=(10, 2)))
    fake.default("c", Reply("It is 7.", usage=(10, 2)))
    config = pool_config(fake, "abc", max_steps=1, max_reasoning_tokens=0, max_subtask_chars=20)
    out = tmp_path / "adapter"
    reports = []
    summary = train(
        config, suite_of(4), _tiny_options(out, base=str(tiny_model), steps=40, save_every=100), on_step=reports.append
    )
    assert summary.steps == 40
    late = sum(r.picks.get("b", 0) for r in reports[-10:]) / sum(sum(r.picks.values()) for r in reports[-10:])
    import torch

    def share_of_b(adapter: str | None) -> float:
        """Plans sampled afresh from the model as the conductor loads it (with the adapter or not)."""
        conductor = HFConductor(
            ModelSpec(
                str(tiny_model), device="cpu", adapter=adapter, quantize=False, compute_dtype="float32", label="tiny"
            ),
            max_reasoning_tokens=0,
            max_subtask_chars=20,
            temperature=1.0,
        )
        loaded = conductor.load_sync()
        torch.manual_seed(123)
        workers = [WorkerInfo(m, "") for m in "abc"]
        picks = []
        for i in range(24):
            request = PlanRequest(f"What is {i} times 6 plus {42 - 6 * i}?", workers, max_steps=1)
            plan = conductor.sample_sync(request, loaded, temperature=1.0)
            assert plan.workflow is not None  # the trained conductor's plans still parse
            picks.append(plan.workflow.steps[0].model)
        return picks.count(1) / len(picks)

    before, after = share_of_b(None), share_of_b(str(out))
    assert before < 0.5, before  # about chance (1/3) before training
    assert after >= 0.6 and after >= before + 0.25, (before, after)
    assert late > 0.5, late  # and the rollouts of the last steps agree


@pytest.mark.slow
def test_repeated_plans_are_not_run_again_and_resume_continues(tiny_model, fake, tmp_path, stiva_home):
    from stiva_tui.train.trainer import train

    fake.default("a", Reply("It is 42.", usage=(10, 2)))
    fake.default("b", Reply("It is 41.", usage=(10, 2)))
    config = pool_config(fake, "ab", max_steps=1, max_reasoning_tokens=0, max_subtask_chars=20)
    out = tmp_path / "adapter"
    train(config, suite_of(2), _tiny_options(out, base=str(tiny_model), steps=2))
    cache = (out / "rollouts.jsonl").read_text().splitlines()
    # each distinct (question, plan) ran once: one-step plans make one request each
    assert len(fake.requests) == len(cache) == len({json.loads(line)["key"] for line in cache})
    assert (out / "checkpoints" / "checkpoint-2").is_dir()
    resumed = train(config, suite_of(2), _tiny_options(out, base=str(tiny_model), steps=3, resume=True))
    assert resumed.steps == 3
    steps = [json.loads(line)["step"] for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]  # the log goes on from the checkpoint, nothing redone
    cached_again = (out / "rollouts.jsonl").read_text().splitlines()
    assert len(fake.requests) == len(cached_again)  # a plan seen before the resume cost nothing


def command_files(tmp_path, fake, *, items: int = 2, price_b: float = 2.0):
    """(suite, config) files for the real `stiva train`: `items` questions, models a and b on `fake`."""
    suite = tmp_path / "s.jsonl"
    suite.write_text(
        "\n".join(
            json.dumps({"id": f"q{i}", "question": f"What is {i} + 42 - {i}?", "answer": "42", "grader": "numeric"})
            for i in range(items)
        )
        + "\n"
    )
    config = tmp_path / "c.toml"
    config.write_text(f"""catalog = false
embedded_worker = false
[conductor]
max_steps = 1
max_reasoning_tokens = 0
max_subtask_chars = 20
[discovery]
enabled = false
[[providers]]
name = "lab"
base_url = "{fake.base_url}"
[[models]]
id = "a"
provider = "lab"
model = "a"
price_in = 1.0
price_out = 1.0
[[models]]
id = "b"
provider = "lab"
model = "b"
price_in = {price_b}
price_out = {price_b}
""")
    return suite, config


@pytest.mark.slow
def test_a_training_killed_and_resumed_logs_each_step_once_and_keeps_its_spend(tiny_model, fake, tmp_path, stiva_home):
    import signal
    import time

    # every run costs $0.002; each reply takes 0.3 s, so a step lasts long enough to be caught
    fake.default("a", Reply("It is 42.", usage=(1000, 1000), latency_s=0.3))
    fake.default("b", Reply("It is 41.", usage=(1000, 1000), latency_s=0.3))
    suite, config = command_files(tmp_path, fake, items=3, price_b=1.0)
    out = tmp_path / "adapter"
    log = out / "train_log.jsonl"
    command = [
        STIVA,
        "train",
        str(suite),
        "--base",
        str(tiny_model),
        "--out",
        str(out),
        "--steps",
        "4",
        "--group",
        "2",
        "--batch",
        "1",
        "--save-every",
        "2",
        "--config",
        str(config),
        "--json",
    ]
    env = {**os.environ, "STIVA_HOME": str(stiva_home)}

    def steps() -> list[int]:
        return [json.loads(line)["step"] for line in log.read_text().splitlines()] if log.exists() else []

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(steps()) < 3 and process.poll() is None:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)  # after step 3, whose checkpoint (every 2 steps) never comes
    process.communicate(timeout=30)
    assert steps() == [1, 2, 3], steps()
    assert (out / "checkpoints" / "checkpoint-2").is_dir() and not (out / "checkpoints" / "checkpoint-4").exists()
    spent = sum(json.loads(line)["cost_usd"] for line in log.read_text().splitlines())
    assert spent > 0
    asked = len(fake.requests)
    # the spend is carried: a budget the killed run already used up refuses at once, asking nothing
    refused = subprocess.run(
        [*command, "--resume", "--budget-usd", f"{spent / 2:.6f}"], capture_output=True, text=True, env=env, timeout=240
    )
    assert refused.returncode == 2 and "already spent" in refused.stderr, refused.stderr[-2000:]
    assert len(refused.stderr.strip().splitlines()) == 1 and len(fake.requests) == asked
    # resumed from checkpoint 2: step 3 is done again, and logged once
    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, env=env, timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert steps() == [1, 2, 3, 4]
    summary = json.loads(resumed.stdout)
    assert summary["steps"] == 4 and summary["cost_usd"] >= spent  # what the killed run paid is counted


@pytest.mark.slow
def test_the_budget_stops_training_cleanly_and_keeps_the_adapter(tiny_model, fake, tmp_path, stiva_home):
    from stiva_tui.train.trainer import train

    fake.default("a", Reply("It is 42.", usage=(1000, 1000)))
    fake.default("b", Reply("It is 41.", usage=(1000, 1000)))
    config = pool_config(fake, "ab", max_steps=1, max_reasoning_tokens=0, max_subtask_chars=20)
    out = tmp_path / "adapter"
    summary = train(config, suite_of(2), _tiny_options(out, base=str(tiny_model), steps=20, budget_usd=0.001))
    assert summary.stopped and summary.stopped.startswith("budget") and summary.steps == 1
    assert (out / "adapter_model.safetensors").exists()


@pytest.mark.slow
def test_an_adapter_trained_on_another_base_is_refused(tiny_model, fake, tmp_path, stiva_home):
    from stiva_tui.conductor.base import ConductorError
    from stiva_tui.conductor.local import HFConductor
    from stiva_tui.inference.checkpoints import ModelSpec
    from stiva_tui.train.trainer import train

    fake.default("a", Reply("It is 42.", usage=(10, 2)))
    fake.default("b", Reply("It is 41.", usage=(10, 2)))
    out = tmp_path / "adapter"
    train(
        pool_config(fake, "ab", max_steps=1, max_reasoning_tokens=0, max_subtask_chars=20),
        suite_of(2),
        _tiny_options(out, base=str(tiny_model), steps=1),
    )
    other = build_random_model(tmp_path / "other", "tiny", seed=1, tokenizer_vocab=1200)
    conductor = HFConductor(
        ModelSpec(str(other), device="cpu", adapter=str(out), quantize=False, compute_dtype="float32", label="other")
    )
    with pytest.raises(ConductorError, match="trained on"):
        conductor.load_sync()


@pytest.mark.slow
def test_train_command_json_summary(tiny_model, fake, tmp_path, stiva_home):
    fake.default("a", Reply("It is 42.", usage=(10, 2)))
    fake.default("b", Reply("It is 41.", usage=(10, 2)))
    suite, config = command_files(tmp_path, fake)
    out = tmp_path / "adapter"
    env = {**os.environ, "STIVA_HOME": str(stiva_home)}
    result = subprocess.run(
        [
            STIVA,
            "train",
            str(suite),
            "--base",
            str(tiny_model),
            "--out",
            str(out),
            "--steps",
            "2",
            "--group",
            "2",
            "--batch",
            "1",
            "--config",
            str(config),
            "--json",
            "--save-every",
            "1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)  # exactly one JSON object on stdout
    # no library chatter a user can do nothing about (bitsandbytes' kernels, tqdm, FutureWarnings)
    assert "kernels" not in result.stderr and "Warning" not in result.stderr and "it/s" not in result.stderr, (
        result.stderr[-2000:]
    )
    assert set(summary) == {
        "steps",
        "reward_first",
        "reward_last",
        "adapter",
        "cost_usd",
        "answers_reused",
        "saved_usd",
    }
    assert summary["steps"] == 2 and summary["adapter"] == str(out) and summary["cost_usd"] > 0
    assert summary["answers_reused"] == 0  # a new STIVA_HOME: nothing was paid for before
    # the same training again into another folder (no rollouts.jsonl): the same seed samples the
    # same plans, whose calls the answer cache has; they are not paid for again
    again = subprocess.run(
        [
            STIVA,
            "train",
            str(suite),
            "--base",
            str(tiny_model),
            "--out",
            str(tmp_path / "again"),
            "--steps",
            "2",
            "--group",
            "2",
            "--batch",
            "1",
            "--config",
            str(config),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    second = json.loads(again.stdout)
    assert second["answers_reused"] > 0 and second["cost_usd"] < summary["cost_usd"], (summary, second)
    assert second["saved_usd"] > 0
    # each step's line says how many of its answers were reused; they add up to the summary's
    first_log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    again_log = [json.loads(line) for line in (tmp_path / "again" / "train_log.jsonl").read_text().splitlines()]
    assert [r["answers_reused"] for r in first_log] == [0, 0]
    assert sum(r["answers_reused"] for r in again_log) == second["answers_reused"]
    # --save-every 1: a checkpoint after each step (the default would keep none of 2 steps)
    assert sorted(p.name for p in (out / "checkpoints").iterdir() if p.name.startswith("checkpoint-")) == [
        "checkpoint-1",
        "checkpoint-2",
    ]
    zero = subprocess.run(
        [
            STIVA,
            "train",
            str(suite),
            "--base",
            str(tiny_model),
            "--out",
            str(out),
            "--save-every",
            "0",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert zero.returncode == 2 and "--save-every must be at least 1" in zero.stderr
    bad = subprocess.run(
        [STIVA, "train", str(suite), "--base", "Qwen/Qwen2.5-7B-Instruct", "--out", str(out), "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert bad.returncode == 2 and "CUDA" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_code_items_are_refused_before_training_where_there_is_no_sandbox(fake, tmp_path, stiva_home):
    from stiva_tui.train.trainer import TrainError, train

    fake_bwrap = tmp_path / "bwrap"
    fake_bwrap.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake_bwrap.chmod(0o755)
    config = pool_config(fake, "ab", max_steps=1).model_copy(
        update={"sandbox": parse_config({"sandbox": {"bwrap": str(fake_bwrap)}}).sandbox}
    )
    code = parse_suite(
        json.dumps({"id": "c", "question": "Write f().", "grader": "code", "tests": "assert f()"}), name="code"
    )
    with pytest.raises(TrainError, match="1 code items refused: no code sandbox"):
        train(config, code, _tiny_options(tmp_path / "out", base="embedded"))
    assert not fake.requests  # nothing was asked, nothing loaded


async def test_a_grader_that_breaks_scores_the_rollout_and_training_goes_on(fake, tmp_path, stiva_home, monkeypatch):
    import stiva_tui.train.rollout as rollout_module
    from stiva_tui.core.workflow import Step, Workflow
    from stiva_tui.runtime import Runtime

    async def broken(item, answer, **options):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(rollout_module, "grade_async", broken)
    fake.default("a", Reply("It is 42.", usage=(10, 2)))
    runtime = await Runtime.create(pool_config(fake, "a"), discover=False)

    class Engine:  # the slice of EngineLoop a rollout uses
        pass

    from stiva_tui.pool.answer_cache import CachingWorker

    engine = Engine()
    engine.runtime = runtime
    engine.caching = runtime.worker = CachingWorker(runtime.worker, None)  # counts what is paid
    try:
        rollouts = rollout_module.Rollouts(engine, None, suite_of(1).items, None, cache_path=tmp_path / "cache.jsonl")

        class Sampled:
            workflow = Workflow((Step(0, "Answer.", ()),))

        result = await rollouts._run_one(suite_of(1).items[0], Sampled())
    finally:
        await runtime.aclose()
    assert result.valid and not result.correct and "grader: RecursionError" in result.error
    assert not (tmp_path / "cache.jsonl").exists() or "q0" not in (tmp_path / "cache.jsonl").read_text()


def test_the_fused_head_scores_only_the_valid_positions_with_the_same_logprobs(monkeypatch):
    """On the CPU, TRL's fused LM head projects every position (prompt, padding) through the head;
    `score_valid_positions_only` makes it project the completion's only: the same log-probabilities
    and gradients, less work."""
    import torch
    import trl.trainer.utils as trl_utils
    from transformers import LlamaConfig, LlamaForCausalLM

    from stiva_tui.train.common import score_valid_positions_only

    # TRL's own (an earlier train() in this process patched it); undone after the test
    monkeypatch.setattr(trl_utils, "_use_triton", getattr(trl_utils._use_triton, "_original", trl_utils._use_triton))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    model = LlamaForCausalLM(config)
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    ids = torch.randint(0, 300, (3, 12))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :7] = -100  # the prompt
    labels[2, 10:] = -100  # after a plan's end

    def run():
        model.zero_grad()
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        (out.log_probs.sum() + out.entropy.sum()).backward()
        return out.log_probs.detach(), out.entropy.detach(), model.model.layers[0].mlp.up_proj.weight.grad.clone()

    seen: list[int] = []
    kernel = trl_utils._ChunkedLogProbFunction.apply
    monkeypatch.setattr(
        trl_utils._ChunkedLogProbFunction,
        "apply",
        lambda hidden, *rest: (seen.append(hidden.shape[0]), kernel(hidden, *rest))[1],
    )
    before = run()
    assert score_valid_positions_only()
    assert score_valid_positions_only()  # patched once
    after = run()
    assert seen == [3 * 11, int((labels[:, 1:] != -100).sum())]
    for b, a in zip(before, after):
        assert torch.allclose(b, a, atol=1e-5)


def test_the_live_view_shows_a_steps_reused_answers():
    """The train live view's spend line says how many of the step's worker answers came from the
    answer cache; a step that reused none says nothing about it."""
    from rich.console import Console

    from stiva_tui.cli.view import TrainView
    from stiva_tui.train.trainer import StepReport

    console = Console(record=True, width=160, force_terminal=False)
    view = TrainView(console, steps=4)

    def shown(reused: int) -> str:
        view.rewards.clear()
        view.step(
            StepReport(
                step=1,
                reward_mean=0.5,
                reward_std=0.1,
                loss=0.01,
                valid_plan_rate=1.0,
                mean_plan_steps=1.0,
                tokens=120,
                cost_usd=0.0001,
                picks={"a": 3, "b": 1},
                spent_usd=0.0002,
                reused=reused,
            )
        )
        console.print(view.render())
        return console.export_text()

    assert "3 answers reused" in shown(3)
    assert "reused" not in shown(0)
    assert "models  a 75%  b 25%" in shown(0)
