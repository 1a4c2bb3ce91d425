"""Choosing the conductor backend (no model is loaded in these tests)."""

from __future__ import annotations

import json

import pytest

from stiva_tui.conductor import choose
from stiva_tui.conductor.base import ConductorError
from stiva_tui.config import ConductorConfig
from stiva_tui.pool.types import PoolModel


def _qwen_folder(tmp_path):
    folder = tmp_path / "qwen"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "qwen2",
                "hidden_size": 3584,
                "num_hidden_layers": 28,
                "num_attention_heads": 28,
                "num_key_value_heads": 4,
                "intermediate_size": 18944,
                "vocab_size": 152064,
            }
        )
    )
    return folder


def test_auto_without_gpu_is_embedded(monkeypatch):
    monkeypatch.setattr(choose, "_cuda_free_gib", lambda: None)
    conductor, reason = choose.select_conductor(ConductorConfig())
    assert conductor.backend == "embedded" and conductor.quantization == "bf16"
    assert reason == "embedded: no CUDA GPU"
    assert choose.describe_choice(ConductorConfig()) == "embedded: no CUDA GPU"
    assert not conductor.loaded  # nothing is loaded by selecting


def test_auto_with_gpu_and_local_model_is_local(monkeypatch, tmp_path):
    monkeypatch.setattr(choose, "_cuda_free_gib", lambda: 60.0)
    config = ConductorConfig(model=str(_qwen_folder(tmp_path)))
    conductor, reason = choose.select_conductor(config)
    assert conductor.backend == "local" and conductor.model == config.model
    assert reason.startswith("local: CUDA GPU with 60 GiB free")
    assert conductor.spec.double_quant and conductor.spec.compute_dtype == "bfloat16"
    assert choose.describe_choice(config).startswith("local: CUDA GPU with 60 GiB free")


def test_auto_falls_back_when_the_model_is_missing_or_too_big(monkeypatch, tmp_path):
    monkeypatch.setattr(choose, "_cuda_free_gib", lambda: 60.0)
    config = ConductorConfig(model=str(tmp_path / "missing"))
    conductor, reason = choose.select_conductor(config)
    assert conductor.backend == "embedded"
    assert "not found" in reason and reason.endswith("falling back")
    # an HF id that is not in the (offline) cache
    conductor, reason = choose.select_conductor(ConductorConfig(model="nobody-here/none-such"))
    assert conductor.backend == "embedded" and "not found" in reason
    monkeypatch.setattr(choose, "_cuda_free_gib", lambda: 2.0)
    conductor, reason = choose.select_conductor(ConductorConfig(model=str(_qwen_folder(tmp_path))))
    assert conductor.backend == "embedded" and "GiB of GPU memory" in reason


def test_explicit_local_that_cannot_run_raises(monkeypatch, tmp_path):
    monkeypatch.setattr(choose, "_cuda_free_gib", lambda: None)
    with pytest.raises(ConductorError, match="no CUDA GPU"):
        choose.select_conductor(ConductorConfig(backend="local"))
    assert choose.describe_choice(ConductorConfig(backend="local")).startswith("local (will fail)")
    monkeypatch.setattr(choose, "_cuda_free_gib", lambda: 60.0)
    with pytest.raises(ConductorError, match="not found"):
        choose.select_conductor(ConductorConfig(backend="local", model=str(tmp_path / "missing")))
    folder = _qwen_folder(tmp_path)
    with pytest.raises(ConductorError, match="adapter"):
        choose.select_conductor(ConductorConfig(backend="local", model=str(folder), adapter=str(tmp_path / "x")))


def test_explicit_embedded(monkeypatch):
    conductor, reason = choose.select_conductor(ConductorConfig(backend="embedded", max_reasoning_tokens=500))
    assert conductor.backend == "embedded" and reason == "embedded: config says so"
    assert conductor.max_reasoning_tokens <= 64  # the 270M model is kept short
    assert conductor.describe()["model"] == "google/gemma-3-270m"


def test_remote(monkeypatch):
    models = [PoolModel(id="m1", provider="p", model="m1"), PoolModel(id="m2", provider="p", model="m2")]

    class Worker:
        def stream_chat(self, *args, **kwargs):  # pragma: no cover - not called
            raise AssertionError

    conductor, reason = choose.select_conductor(ConductorConfig(backend="remote", model="m2"), models, Worker())
    assert conductor.backend == "remote" and conductor.model == "m2"
    assert reason.startswith("remote: config says so")
    with pytest.raises(ConductorError, match="not a pool model"):
        choose.select_conductor(ConductorConfig(backend="remote", model="zzz"), models, Worker())
    assert choose.describe_choice(ConductorConfig(backend="remote", model="m2")).startswith("remote")


def test_real_machine_choice_is_explained():
    text = choose.describe_choice(ConductorConfig())
    assert text.startswith(("local:", "embedded:"))
