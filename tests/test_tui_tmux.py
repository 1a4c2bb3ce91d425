"""The real `stiva` console script in a detached tmux session, against a FakeProvider."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import tomli_w

from tests.conftest_model import model_cache  # noqa: F401  (session fixture: the converted model)
from tests.support import cli, procs
from tests.support.fakeprovider import Reply
from tests.support.tui import PLAN_TWO_STEPS

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.skipif(
        shutil.which("tmux") is None and not os.environ.get("CI"),
        reason="tmux is not installed (in CI this fails instead)",
    ),
]

STIVA = Path(cli.STIVA)


class Tmux:
    def __init__(self, tmp: Path):
        self.socket = f"stiva-test-{uuid.uuid4().hex[:8]}"
        self.session = "stiva"

    def run(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20)
        if check and out.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {out.stderr}")
        return out.stdout

    def start(self, command: str, size: tuple[int, int] = (140, 42)) -> None:
        self.run("new-session", "-d", "-s", self.session, "-x", str(size[0]), "-y", str(size[1]), command)

    def send(self, *keys: str, literal: bool = False) -> None:
        self.run("send-keys", "-t", self.session, *(["-l"] if literal else []), *keys)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.session, check=False)

    def wait_for(self, *needles: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if all(n in text for n in needles):
                return text
            time.sleep(0.2)
        raise AssertionError(f"never saw {needles} on screen:\n{text}")

    def wait_exit(self, timeout: float) -> bool:
        """True once the session is gone (the app exited and tmux closed its window)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive = (
                subprocess.run(
                    ["tmux", "-L", self.socket, "has-session", "-t", self.session], capture_output=True
                ).returncode
                == 0
            )
            if not alive:
                return True
            time.sleep(0.2)
        return False

    def kill(self) -> None:
        self.run("kill-server", check=False)


def _stiva_command(fake, tmp_path, stiva_home) -> str:
    config = tmp_path / "config.toml"
    config.write_text(
        tomli_w.dumps(
            {
                "conductor": {"backend": "remote", "model": "cond"},
                "providers": [{"name": "fake", "base_url": fake.base_url}],
                "models": [
                    {"id": "cond", "provider": "fake", "model": "cond", "description": "conductor"},
                    {"id": "w1", "provider": "fake", "model": "w1", "price_in": 1.0, "price_out": 2.0},
                    {"id": "w2", "provider": "fake", "model": "w2", "price_in": 3.0, "price_out": 6.0},
                ],
                "discovery": {"enabled": False},
                "catalog": False,
            }
        )
    )
    env = {
        "STIVA_HOME": str(stiva_home),
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "HF_HUB_OFFLINE": "1",
        "TERM": "xterm-256color",
    }
    return " ".join(
        [
            "env",
            *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
            shlex.quote(str(STIVA)),
            "--config",
            shlex.quote(str(config)),
        ]
    )


def test_real_stiva_answers_in_tmux(fake, tmp_path, stiva_home):
    assert STIVA.exists(), f"console script missing: {STIVA}"
    fake.script("cond", Reply(PLAN_TWO_STEPS))
    fake.default("w1", Reply("An outline of the answer.", usage=(20, 6)))
    fake.default("w2", Reply("The answer is forty-two.", usage=(50, 5)))
    tmux = Tmux(tmp_path)
    tmux.start(_stiva_command(fake, tmp_path, stiva_home))
    try:
        tmux.wait_for("Ask anything", "conductor:", timeout=30)
        tmux.send("What is the meaning of life?", literal=True)
        tmux.wait_for("What is the meaning of life?")
        time.sleep(0.3)  # sent in the same read as the text, ctrl+j would arrive as part of it
        tmux.send("C-j")
        screen = tmux.wait_for("The answer is forty-two.", "w1", "w2", "$0.0", "✓", timeout=30)
        assert "What is the meaning of life?" in screen
        assert "← 1" in screen  # step 2 reads step 1
        tmux.send("C-q")
        assert tmux.wait_exit(timeout=10), "stiva did not quit on ctrl+q"
        # The run is in the history database the app wrote.
        from stiva_tui.store import Store

        with Store.open(stiva_home / "data" / "stiva.db") as store:
            runs = store.list_runs()
            assert runs and runs[0].status == "finished" and runs[0].source == "tui"
    finally:
        tmux.kill()


def test_real_stiva_bench_shows_live_progress_in_a_terminal(fake, tmp_path, stiva_home):
    """`stiva bench` on a real terminal: the live view counts items as they finish, then the table;
    ctrl+c in the middle stops it, and the same command continues it."""
    import json as _json

    fake.default("w1", lambda r: Reply("The sum is 3.", usage=(10, 2), latency_s=0.3))
    config = tmp_path / "config.toml"
    config.write_text(
        tomli_w.dumps(
            {
                "providers": [{"name": "fake", "base_url": fake.base_url}],
                "models": [{"id": "w1", "provider": "fake", "model": "w1", "price_in": 1.0, "price_out": 2.0}],
                "discovery": {"enabled": False},
                "catalog": False,
                "embedded_worker": False,
            }
        )
    )
    suite = tmp_path / "s.jsonl"
    suite.write_text(
        "".join(
            _json.dumps({"id": f"q{i}", "question": f"What is 1 + 2? ({i})", "answer": "3", "grader": "numeric"}) + "\n"
            for i in range(30)
        )
    )
    env = {
        "STIVA_HOME": str(stiva_home),
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "HF_HUB_OFFLINE": "1",
        "TERM": "xterm-256color",
    }
    command = " ".join(
        [
            "env",
            *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
            shlex.quote(str(STIVA)),
            "bench",
            shlex.quote(str(suite)),
            "--systems",
            "direct:w1",
            "--concurrency",
            "2",
            "--config",
            shlex.quote(str(config)),
            ";",
            "sleep",
            "30",
        ]
    )
    tmux = Tmux(tmp_path)
    tmux.start(command)
    try:
        screen = tmux.wait_for("bench ", "direct:w1", "items", "ETA", timeout=30)
        tmux.wait_for("100.0%", timeout=30)  # the running accuracy, while items remain
        tmux.send("C-c")
        screen = tmux.wait_for("stopped:", "run the same command again", timeout=30)
        done = int(screen.split("/30 items")[0].split()[-1])
        assert 0 < done < 30, screen
    finally:
        tmux.kill()
    tmux = Tmux(tmp_path)
    tmux.start(command)
    try:
        screen = tmux.wait_for("p95", "report in", timeout=60)  # the final table
        assert "30/30 items" in screen and f"{done} resumed" in screen, screen
        assert "100.0%" in screen
    finally:
        tmux.kill()


def test_real_stiva_at_80_columns_keeps_help_in_the_footer_and_walks_the_prompt_history(fake, tmp_path, stiva_home):
    assert STIVA.exists(), f"console script missing: {STIVA}"
    fake.default("cond", Reply(PLAN_TWO_STEPS))
    fake.default("w1", Reply("An outline.", usage=(20, 6)))
    fake.default("w2", Reply("Forty-two.", usage=(50, 5)))
    tmux = Tmux(tmp_path)
    tmux.start(_stiva_command(fake, tmp_path, stiva_home), size=(80, 24))
    try:
        screen = tmux.wait_for("Ask anything", "conductor:", timeout=30)
        assert screen.rstrip().splitlines()[-1].lstrip().startswith("f1 Help")
        tmux.send("Meaning of life?", literal=True)
        tmux.wait_for("Meaning of life?")
        time.sleep(0.3)
        tmux.send("C-j")
        tmux.wait_for("Forty-two.", "✓", timeout=30)
        time.sleep(0.3)
        shown = tmux.screen().count("Meaning of life?")  # the question and the tree's root
        tmux.send("Up")  # the empty prompt brings the question back
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and tmux.screen().count("Meaning of life?") <= shown:
            time.sleep(0.2)
        assert tmux.screen().count("Meaning of life?") == shown + 1, tmux.screen()
        tmux.send("C-l")  # F12's stand-in: the bench screen
        tmux.wait_for("Benches", "No benches yet", timeout=10)
        tmux.send("C-q")
        assert tmux.wait_exit(timeout=10), "stiva did not quit on ctrl+q"
    finally:
        tmux.kill()


@pytest.mark.model
def test_real_stiva_offline_runs_the_model_in_a_process_of_its_own(model_cache, tmp_path, stiva_home):  # noqa: F811
    """The embedded model loads and answers in a child process: the app's own process never
    imports torch, and the child leaves with the app."""
    command, _ = _offline_command(model_cache, tmp_path, stiva_home, backend="embedded")
    tmux = Tmux(tmp_path)
    tmux.start(command, size=(120, 40))
    try:
        app = _app_pid(tmux)
        _ask_paris(tmux, timeout=180)
        (child,) = [pid for pid in procs.children(app) if "model_process_main" in procs.command_line(pid)]
        assert procs.maps_torch(child), "the model process answered without torch?"
        assert not procs.maps_torch(app), "the app's own process imported torch"
        tmux.send("C-q")
        assert tmux.wait_exit(timeout=15), "stiva did not quit on ctrl+q"
        assert procs.gone(child), "the model process outlived the app"
    finally:
        tmux.kill()


def _offline_command(
    model_cache,  # noqa: F811
    tmp_path,
    stiva_home,
    *,
    warm: bool = False,
    backend: str | None = None,
) -> tuple[str, dict[str, str]]:
    """The real `stiva` offline (the embedded model alone), and its environment; `warm`: the warm
    worker allowed (the suite turns it off); `backend`: the conductor's, named in the config."""
    config = tmp_path / "offline.toml"
    settings: dict = {"discovery": {"enabled": False}, "catalog": False}
    if backend is not None:
        settings["conductor"] = {"backend": backend}
    config.write_text(tomli_w.dumps(settings))
    env = {
        "STIVA_HOME": str(stiva_home),
        "STIVA_MODEL_CACHE": str(model_cache),
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "HF_HUB_OFFLINE": "1",
        "TERM": "xterm-256color",
    }
    unset = ["-u", "STIVA_NO_WARM"] if warm else []
    command = " ".join(
        ["exec", "env", *unset, *(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.quote(str(STIVA))]
        + ["--config", shlex.quote(str(config))]
    )
    return command, {**env, "CONFIG": str(config)}


def _app_pid(tmux: Tmux) -> int:
    """The app's pid, once its prompt shows."""
    tmux.wait_for("Ask anything", timeout=30)
    return int(tmux.run("display-message", "-p", "-t", tmux.session, "#{pane_pid}").strip())


def _ask_paris(tmux: Tmux, timeout: float) -> None:
    """Types a question into the app and sends it; returns once its answer, Paris, is done."""
    tmux.send("What is the capital of France?", literal=True)
    tmux.wait_for("What is the capital of France?")
    time.sleep(0.3)
    tmux.send("C-j")
    tmux.wait_for("Paris", "✓", timeout=timeout)


def _model_child(app: int) -> int | None:
    found = [pid for pid in procs.children(app) if "model_process_main" in procs.command_line(pid)]
    return found[0] if found else None


def _until(condition, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    return condition()


@pytest.mark.model
def test_real_stiva_offline_loads_its_model_before_any_key_and_answers_a_question_typed_at_once(
    model_cache,  # noqa: F811
    tmp_path,
    stiva_home,
):
    """No key, no local server: the app starts its model process as it starts, not when the first
    question comes. Before any key is pressed the child is there and loading (torch mapped); a
    question typed as soon as the prompt shows is answered once the model is ready."""
    command, _ = _offline_command(model_cache, tmp_path, stiva_home)
    tmux = Tmux(tmp_path)
    tmux.start(command, size=(120, 40))
    try:
        app = _app_pid(tmux)
        child = _until(lambda: _model_child(app), 15)
        assert child, "no model process under the app before any key was pressed"
        assert _until(lambda: procs.maps_torch(child), 60), "the model process is not loading the model"
        assert "Paris" not in tmux.screen()
        _ask_paris(tmux, timeout=180)
        assert _model_child(app) == child, "the question started another model process"
        tmux.send("C-q")
        assert tmux.wait_exit(timeout=15), "stiva did not quit on ctrl+q"
        assert procs.gone(child), "the model process outlived the app"
    finally:
        tmux.kill()


@pytest.mark.model
def test_real_stiva_started_after_an_ask_answers_from_the_warm_workers_model(
    model_cache,  # noqa: F811
    tmp_path,
    stiva_home,
):
    """One copy of the model per user: an app started while the warm `stiva ask` worker is up
    answers from that worker's model, loading none of its own (no model process under it)."""
    import asyncio

    from stiva_tui.cli import warm

    command, env = _offline_command(model_cache, tmp_path, stiva_home, warm=True)
    ask_env = {k: v for k, v in os.environ.items() if k != "STIVA_NO_WARM"}
    ask_env.update({k: v for k, v in env.items() if k != "CONFIG"})
    asked = subprocess.run(
        [str(STIVA), "ask", "What is the capital of Italy?", "--config", env["CONFIG"]],
        env=ask_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert asked.returncode == 0, asked.stderr[-2000:]
    worker = asyncio.run(warm.worker_status())
    assert worker is not None, "the ask left no warm worker"
    tmux = Tmux(tmp_path)
    tmux.start(command, size=(120, 40))
    try:
        app = _app_pid(tmux)
        _ask_paris(tmux, timeout=60)
        assert _model_child(app) is None, "the app loaded a model of its own beside the warm worker's"
        during = asyncio.run(warm.worker_status())
        assert during is not None and during["pid"] == worker["pid"] and during["fronts"] == 1
        tmux.send("C-q")
        assert tmux.wait_exit(timeout=15), "stiva did not quit on ctrl+q"
        after = asyncio.run(warm.worker_status())
        assert after is not None and after["pid"] == worker["pid"], "the app's leaving ended the worker"
    finally:
        tmux.kill()
        os.kill(worker["pid"], 15)
        procs.gone(worker["pid"])
