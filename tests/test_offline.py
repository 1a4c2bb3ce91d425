"""The fully offline run: no keys, no network, no GPU — the embedded Gemma plans and answers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest_model import model_cache  # noqa: F401  (session fixture: the converted model)
from tests.support.cli import STIVA


@pytest.mark.model
def test_offline_ask_plans_and_answers_on_the_embedded_model(model_cache, tmp_path, stiva_home):  # noqa: F811
    config = tmp_path / "offline.toml"
    config.write_text("")  # defaults everywhere: conductor auto, catalog on, discovery on
    env = {
        **os.environ,
        "STIVA_HOME": str(stiva_home),
        "STIVA_MODEL_CACHE": str(model_cache),
        "HF_HUB_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    result = subprocess.run(
        [STIVA, "ask", "What is the capital of France?", "--config", str(config), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    # no library chatter a user can do nothing about (bitsandbytes' CPU backend warns at import)
    assert "kernels-community" not in result.stderr and "Traceback" not in result.stderr
    trace = json.loads(result.stdout)
    conductor = trace["conductor"]
    assert conductor["backend"] == "embedded" and conductor["quantization"] == "bf16"
    assert "gemma-3-270m" in conductor["model"]
    # A short question on a pool of the embedded worker alone: one step, known without generating it.
    assert conductor["usage"]["prompt_tokens"] == 0 and conductor["usage"]["completion_tokens"] == 0
    (round_,) = trace["rounds"]
    assert len(round_["workflow"]["model_id"]) == 1, round_["workflow"]
    assert "one model in the pool: one step" in round_["reasoning"]
    (subtask,) = round_["workflow"]["subtasks"]
    assert "model number" not in subtask and "step 0" not in subtask, subtask  # not copied from rules
    (step,) = round_["steps"]
    assert step["model"] == "local/gemma-3-270m" and step["status"] == "finished"
    # The base-model prompt: a tight cap, one line, no echo of roles, markers or plan syntax.
    assert 0 < step["usage"]["completion_tokens"] <= 48
    answer = trace["answer"]
    assert answer == step["output"] and answer.strip() and "\n" not in answer
    assert not re.search(r"(?i)\b(user|assistant|question|answer|task)\s*:|model_id|access_list", answer), answer
    assert "Paris" in answer, answer  # the model answers this one right, greedily, every time
    assert trace["totals"]["cost_usd"] == 0.0


@pytest.mark.model
def test_the_readme_sum_is_right_offline(model_cache, tmp_path, stiva_home):  # noqa: F811
    """`stiva ask "What is 17*23?"` with no keys: the 270M model alone writes a wrong product; with
    the calculator's note in its prompt it answers 391."""
    env = {
        **os.environ,
        "STIVA_HOME": str(stiva_home),
        "STIVA_MODEL_CACHE": str(model_cache),
        "HF_HUB_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    config = tmp_path / "offline.toml"
    config.write_text("")
    result = subprocess.run(
        [STIVA, "ask", "What is 17*23?", "--config", str(config), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    trace = json.loads(result.stdout)
    assert "391" in trace["answer"], trace["answer"]


def test_loading_the_libraries_asks_no_hub(tmp_path):
    """bitsandbytes' CPU backend fetches a kernel from the hub at import when the `kernels` package
    is installed (transformers 5.25 brings it) and the CPU has AVX512-BF16. Stiva imports it with
    `kernels` hidden: no hub request, even online. The hub here is a real HTTP server on 127.0.0.1
    that records every request (HF_ENDPOINT), so an attempt cannot go unseen."""
    import http.server
    import threading

    seen: list[str] = []

    class Hub(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            self.send_response(404)
            self.end_headers()

        do_HEAD = do_POST = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env.update(
            {
                "HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
                "HF_HOME": str(tmp_path / "hf"),
                "KERNELS_CACHE": str(tmp_path / "kernels"),
            }
        )
        code = (
            "from stiva_tui.inference.checkpoints import quiet_libraries\n"
            "quiet_libraries()\n"
            "import peft, bitsandbytes.backends.cpu.ops\n"  # peft imports bitsandbytes too
            "print('imported')\n"
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    finally:
        server.shutdown()
    assert result.returncode == 0 and "imported" in result.stdout, result.stderr[-2000:]
    assert seen == [], seen
    assert "kernels-community" not in result.stderr, result.stderr[-2000:]
