"""The fully offline run: no keys, no network, no GPU — the embedded Gemma plans and answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest_model import model_cache  # noqa: F401  (session fixture: the converted model)

STIVA = str(Path(sys.executable).parent / "stiva")


@pytest.mark.model
def test_offline_ask_plans_and_answers_on_the_embedded_model(model_cache, tmp_path, stiva_home):  # noqa: F811
    config = tmp_path / "offline.toml"
    # Defaults everywhere (conductor auto, catalog on, discovery on); short answers keep it quick.
    config.write_text("[workers]\nmax_tokens = 24\n")
    env = {**os.environ, "STIVA_HOME": str(stiva_home), "STIVA_MODEL_CACHE": str(model_cache),
           "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([STIVA, "ask", "What is 17*23?", "--config", str(config), "--json"],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    # no library chatter a user can do nothing about (bitsandbytes' CPU backend warns at import)
    assert "kernels-community" not in result.stderr and "Traceback" not in result.stderr
    trace = json.loads(result.stdout)
    conductor = trace["conductor"]
    assert conductor["backend"] == "embedded" and conductor["quantization"] == "nf4"
    assert "gemma-3-270m" in conductor["model"]
    assert conductor["usage"]["prompt_tokens"] > 0 and conductor["usage"]["completion_tokens"] > 0
    steps = [s for r in trace["rounds"] for s in r["steps"]]
    assert steps and all(s["model"] == "local/gemma-3-270m" and s["status"] == "finished" for s in steps)
    assert all(0 < s["usage"]["completion_tokens"] <= 24 for s in steps)
    assert trace["answer"] == steps[-1]["output"] and trace["answer"].strip()
    assert trace["totals"]["cost_usd"] == 0.0
