"""The training core that `stiva train` (GRPO) and `stiva train --from-votes` (DPO) share, and the
adapter manifest (`stiva_adapter.json`) both write and the conductor reads. Nothing here trains:
these run in seconds."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

# As the trainers wrote them before the manifest had one reader and writer (json.dumps(indent=2)):
# GRPO with every optional field, DPO (votes and a graded bench) with every optional field, and
# the smallest kind an old or hand-made adapter has.
GRPO_MANIFEST = """{
  "base": "embedded",
  "label": "google/gemma-3-270m",
  "identity": "sha256:0123456789abcdef0123456789abcdef",
  "fingerprint": {
    "model_type": "gemma3_text",
    "hidden_size": 640,
    "num_hidden_layers": 18,
    "num_attention_heads": 4,
    "intermediate_size": 2048,
    "vocab_size": 262144
  },
  "suite": "skills",
  "steps": 40,
  "prompt_style": "compact",
  "max_subtask_chars": 100,
  "max_steps_per_plan": 2,
  "preferences": [
    "cheap",
    "best"
  ]
}
"""
DPO_MANIFEST = """{
  "base": "/models/small",
  "label": "/models/small",
  "identity": "sha256:fedcba9876543210fedcba9876543210",
  "fingerprint": {
    "model_type": "qwen2",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "vocab_size": 1000
  },
  "suite": "votes",
  "steps": 12,
  "trained_on": "votes",
  "pairs": 7,
  "prompt_style": "compact",
  "benches": [
    "b-123"
  ],
  "bench_pairs": "best",
  "max_subtask_chars": 16,
  "max_steps_per_plan": 1,
  "sft_weight": 1.0,
  "preferences": [
    "balanced"
  ]
}
"""
GRPO_PLAIN_MANIFEST = """{
  "base": "Qwen/Qwen2.5-7B-Instruct",
  "label": "Qwen/Qwen2.5-7B-Instruct",
  "identity": "Qwen/Qwen2.5-7B-Instruct",
  "fingerprint": {
    "model_type": "qwen2",
    "hidden_size": 3584,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "intermediate_size": 18944,
    "vocab_size": 152064
  },
  "suite": "t",
  "steps": 2
}
"""


def adapter_folder(tmp_path, name: str, text: str):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "stiva_adapter.json").write_text(text)
    return folder


# --- the manifest ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [GRPO_MANIFEST, DPO_MANIFEST, GRPO_PLAIN_MANIFEST], ids=["grpo", "dpo", "grpo-plain"])
def test_an_adapter_manifest_of_the_previous_format_reads_and_writes_back_byte_for_byte(tmp_path, text):
    from stiva_tui.inference.adapter_manifest import AdapterManifest

    old = adapter_folder(tmp_path, "old", text)
    manifest = AdapterManifest.read(old)
    assert manifest is not None
    data = json.loads(text)
    assert (manifest.base, manifest.label, manifest.identity) == (data["base"], data["label"], data["identity"])
    assert manifest.fingerprint == data["fingerprint"] and manifest.steps == data["steps"]
    assert manifest.prompt_style == data.get("prompt_style")
    assert manifest.max_steps_per_plan == data.get("max_steps_per_plan")
    assert manifest.preferences == tuple(data.get("preferences", ()))
    again = tmp_path / "again"
    again.mkdir()
    manifest.write(again)
    assert (again / "stiva_adapter.json").read_text() == text


def test_an_old_or_hand_made_manifest_still_reads_and_bad_values_are_left_out(tmp_path):
    """Adapters made before the manifest held more than its base, or written by hand: what is
    there is read, what is not of its kind is ignored (the adapter still loads), and a file
    that is not a JSON object is no manifest at all."""
    from stiva_tui.inference.adapter_manifest import AdapterManifest, adapter_base, adapter_plan_format

    bare = adapter_folder(tmp_path, "bare", json.dumps({"base": "embedded"}))
    manifest = AdapterManifest.read(bare)
    assert manifest is not None and manifest.base == "embedded" and manifest.identity is None
    assert manifest.fingerprint == {} and manifest.plan_format() == (None, None, None)
    odd = adapter_folder(
        tmp_path,
        "odd",
        json.dumps(
            {
                "base": "",
                "max_steps_per_plan": True,
                "prompt_style": "loud",
                "max_subtask_chars": -3,
                "fingerprint": [1, 2],
                "later_field": {"kept": 1},
            }
        ),
    )
    manifest = AdapterManifest.read(odd)
    assert manifest is not None and manifest.base is None and manifest.fingerprint == {}
    assert manifest.plan_format() == (None, None, None)
    assert adapter_base(str(odd)) is None and adapter_plan_format(str(odd)) == (None, None, None)
    assert adapter_base(str(bare)) == "embedded" and adapter_base(None) is None
    assert AdapterManifest.read(adapter_folder(tmp_path, "list", "[1, 2]")) is None
    assert AdapterManifest.read(adapter_folder(tmp_path, "broken", "{not json")) is None
    assert AdapterManifest.read(tmp_path / "missing") is None
    trained = adapter_folder(tmp_path, "trained", GRPO_MANIFEST)
    assert adapter_plan_format(str(trained)) == ("compact", 100, 2)


def test_the_checkpoint_loader_refuses_an_old_manifests_other_base(tmp_path):
    """The loader's base check reads the previous format's identity and shapes as before."""
    from stiva_tui.inference.checkpoints import _check_adapter_base
    from stiva_tui.inference.errors import ModelError

    folder = adapter_folder(tmp_path, "grpo", GRPO_MANIFEST)
    fingerprint = json.loads(GRPO_MANIFEST)["fingerprint"]
    same = SimpleNamespace(config=SimpleNamespace(**fingerprint))
    _check_adapter_base(same, folder)  # the base it was trained on: accepted
    other = SimpleNamespace(config=SimpleNamespace(**{**fingerprint, "hidden_size": 896}))
    with pytest.raises(ModelError, match="trained on google/gemma-3-270m .hidden_size 640.*hidden_size 896"):
        _check_adapter_base(other, folder)


# --- no benchmark switches in the product ------------------------------------------------------


def test_the_step_plans_are_sampled_in_one_batch_whatever_the_environment_says(monkeypatch, tmp_path):
    """STIVA_TRAIN_UNBATCHED was a benchmark's switch: the product no longer reads it. A shuffled
    pool's plans (each its own prompt) are sampled in one batched generation."""
    import asyncio

    from stiva_tui.conductor.local import SampledPlan
    from stiva_tui.evals.suite import parse_suite
    from stiva_tui.train.rollout import Rollouts
    from tests.support.train import StubTrainer

    class Conductor:
        spec = None

        def __init__(self):
            self.calls: list[tuple[str, int]] = []

        def sample_each_sync(self, requests, loaded, temperature):
            self.calls.append(("batched", len(requests)))
            return [SampledPlan([1], [2], [-0.5], "no plan", None) for _ in requests]

        def sample_many_sync(self, request, loaded, n, temperature):
            self.calls.append(("one request", n))
            return [SampledPlan([1], [2], [-0.5], "no plan", None) for _ in range(n)]

    monkeypatch.setenv("STIVA_TRAIN_UNBATCHED", "1")
    models = [
        SimpleNamespace(id=f"m{i}", description="", kind="remote", price_in=1.0, price_out=1.0, latency_s=None)
        for i in range(2)
    ]
    engine = SimpleNamespace(
        runtime=SimpleNamespace(models=models, config=None),
        caching=SimpleNamespace(paid_usd=0.0, paid_tokens=0, hits=0),
        call=lambda coro: asyncio.run(coro),
    )
    suite = parse_suite(
        json.dumps({"id": "q0", "question": "What is 6 times 7?", "answer": "42", "grader": "numeric"}), name="t"
    )
    conductor = Conductor()
    rollouts = Rollouts(
        engine, conductor, suite.items, None, cache_path=tmp_path / "cache.jsonl", max_steps=1, shuffle_pool=True
    )
    out = rollouts(["q0"] * 4, StubTrainer)
    assert conductor.calls == [("batched", 4)]
    assert len(out["completion_ids"]) == 4


def test_the_fused_head_is_compacted_whatever_the_environment_says(monkeypatch):
    """STIVA_TRAIN_ALL_POSITIONS was a benchmark's switch: the product no longer reads it."""
    import trl.trainer.utils as trl_utils

    from stiva_tui.train.common import score_valid_positions_only

    monkeypatch.setattr(trl_utils, "_use_triton", getattr(trl_utils._use_triton, "_original", trl_utils._use_triton))
    monkeypatch.setenv("STIVA_TRAIN_ALL_POSITIONS", "1")
    assert score_valid_positions_only()
    assert getattr(trl_utils._use_triton, "_stiva", False)


# --- the shared scaffolding ----------------------------------------------------------------------


def control():
    from transformers import TrainerControl

    return TrainerControl()


def test_a_new_training_starts_a_new_log_and_a_resumed_one_cuts_it_to_its_checkpoint(tmp_path):
    from stiva_tui.train.common import TrainError, TrainingRun

    out = tmp_path / "adapter"
    run = TrainingRun.open(out, resume=False)
    assert out.is_dir() and run.checkpoints == out / "checkpoints" and run.resume_from is None
    for step in (1, 2, 3):
        run.log({"step": step, "loss": 0.5})
    assert [line["step"] for line in run.logged()] == [1, 2, 3]
    with pytest.raises(TrainError, match="--resume: no checkpoint"):
        TrainingRun.open(out, resume=True)
    checkpoint = run.checkpoints / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    resumed = TrainingRun.open(out, resume=True)
    assert resumed.resume_from == str(checkpoint)
    resumed.start_log(resume=True)
    assert [line["step"] for line in resumed.logged()] == [1, 2]  # step 3 is done (and logged) again
    TrainingRun.open(out, resume=False).start_log(resume=False)
    assert not (out / "train_log.jsonl").exists()


def test_the_callback_logs_each_step_and_stops_cleanly_when_asked_or_over_budget(tmp_path):
    from stiva_tui.train.common import TrainingRun

    run = TrainingRun.open(tmp_path / "adapter", resume=False)
    seen, stop, budget = [], {"reason": None}, {"reason": None}

    def report(step, logs, elapsed):
        assert elapsed >= 0.0
        return SimpleNamespace(log_line=lambda: {"step": step, "loss": logs["loss"]})

    callback = run.callback(
        report, on_step=seen.append, should_stop=lambda: stop["reason"], over_budget=lambda: budget["reason"]
    )
    state = SimpleNamespace(global_step=1)
    callback.on_step_begin(None, state, control())
    callback.on_log(None, state, control(), logs={"learning_rate": 0.1})  # not a step's line
    callback.on_log(None, state, control(), logs={"loss": 0.25})
    going = control()
    callback.on_step_end(None, state, going)
    assert not going.should_training_stop and run.stopped is None
    assert run.logged() == [{"step": 1, "loss": 0.25}] and len(seen) == 1
    stop["reason"] = "interrupted"
    budget["reason"] = "budget: $1.0000 spent of $1.0000"
    stopping = control()
    callback.on_step_end(None, SimpleNamespace(global_step=2), stopping)
    assert stopping.should_training_stop and stopping.should_save
    assert run.stopped == "budget: $1.0000 spent of $1.0000"  # the budget's reason says more
