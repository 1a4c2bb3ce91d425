"""`stiva ask` answers warm: the first ask starts a worker process that keeps the runtime (the model
it loaded) between asks, and later asks are answered by it (stiva_tui/cli/warm.py).

The fast lane drives the real `stiva` entry point against a scripted provider on 127.0.0.1, with
`[ask] warm_remote = true` so that a remote conductor's asks use the worker too; the slow lane asks
the embedded model twice."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from tests.conftest_model import model_cache  # noqa: F401  (session fixture: the converted model)
from tests.support.cli import run_stiva
from tests.support.fakeprovider import Reply
from tests.support.warm import ONE_STEP, warm_pool, write_warm_config


@pytest.fixture(autouse=True)
def warm_allowed(monkeypatch):
    """The rest of the suite may turn the worker off (STIVA_NO_WARM): these tests are about it."""
    monkeypatch.delenv("STIVA_NO_WARM", raising=False)


def status() -> dict | None:
    from stiva_tui.cli import warm

    return asyncio.run(warm.worker_status())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of this process's (the in-process `stiva` started it) is gone all the same
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def wait_until(condition, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@pytest.fixture
def stop_worker():
    """Ends the worker a test started (by its pid), whatever the test found."""
    pids: list[int] = []
    yield pids
    found = status()
    for pid in {*pids, *([found["pid"]] if found else [])}:
        if alive(pid):
            os.kill(pid, signal.SIGTERM)
            wait_until(lambda pid=pid: not alive(pid), 30)


@pytest.fixture
def config(fake, tmp_path):
    return warm_pool(fake, tmp_path / "c.toml")


def runs(home: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(home / "data" / "stiva.db")) as conn:
        return list(conn.execute("SELECT question, source FROM runs ORDER BY created_at"))


def test_the_second_ask_is_answered_by_the_worker_the_first_one_started(config, fake, stiva_home, stop_worker):
    first = run_stiva("ask", "What is six times seven?", "--config", str(config), "--json", home=stiva_home)
    assert first.returncode == 0, first.stderr
    worker = status()
    assert worker is not None, "no warm worker listens after the first ask"
    stop_worker.append(worker["pid"])
    assert worker["pid"] != os.getpid() and worker["served"] == 1
    trace = json.loads(first.stdout)
    assert trace["answer"] == "forty-two" and trace["source"] == "cli"
    assert trace["conductor"]["model"] == "cond" and trace["conductor"]["reason"]

    second = run_stiva("ask", "And seven times six?", "--config", str(config), home=stiva_home)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "forty-two"
    assert "conductor:" in second.stderr and "conversation " in second.stderr  # the same lines as in-process
    again = status()
    assert again is not None and again["pid"] == worker["pid"] and again["served"] == 2
    # Both runs are in the history, as asks from the command line, and both went to the provider.
    assert runs(stiva_home) == [("What is six times seven?", "cli"), ("And seven times six?", "cli")]
    assert len(fake.requests_for("cond")) == 2

    # --continue goes through the worker too: the conversation the second ask offered grows.
    conversation = second.stderr.split("conversation ", 1)[1].split()[0]
    third = run_stiva("ask", "Thanks!", "--config", str(config), "--continue", conversation, home=stiva_home)
    assert third.returncode == 0, third.stderr
    assert status()["served"] == 3
    last_plan_request = fake.requests_for("cond")[-1]
    assert "seven times six" in json.dumps(last_plan_request.messages)


def test_a_failing_ask_keeps_its_line_and_exit_code_through_the_worker(config, stiva_home, stop_worker):
    result = run_stiva("ask", "Q", "--config", str(config), "--baseline", "direct:nope", home=stiva_home)
    found = status()
    assert found is not None
    stop_worker.append(found["pid"])
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("stiva:") == 1 and "nope" in result.stderr and "Traceback" not in result.stderr
    unknown = run_stiva("ask", "Q", "--config", str(config), "--continue", "nope", home=stiva_home)
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert status()["pid"] == found["pid"]


def test_no_warm_asks_in_this_process(config, stiva_home, stop_worker):
    result = run_stiva("ask", "Q", "--config", str(config), "--no-warm", home=stiva_home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "forty-two"
    assert status() is None
    off = write_warm_config(config.with_name("off.toml"), config.read_text().split('base_url = "')[1].split('"')[0], 0)
    result = run_stiva("ask", "Q", "--config", str(off), home=stiva_home)
    assert result.returncode == 0, result.stderr
    assert status() is None


def test_the_worker_leaves_once_idle(fake, tmp_path, stiva_home, stop_worker):
    fake.default("cond", Reply(ONE_STEP))
    fake.default("w1", Reply("forty-two"))
    config = write_warm_config(tmp_path / "c.toml", fake.base_url, idle_s=3)
    assert run_stiva("ask", "Q", "--config", str(config), home=stiva_home).returncode == 0
    from stiva_tui.cli.warm import socket_path

    path = socket_path()
    found = status()
    assert found is not None, "no warm worker listens after the ask"
    stop_worker.append(found["pid"])
    assert wait_until(lambda: not alive(found["pid"])), "the worker did not leave once idle"
    assert wait_until(lambda: not path.exists()), "the idle worker left its socket behind"
    assert stat_mode(path.parent) == 0o700


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_stale_socket_is_replaced_and_the_new_one_is_private(config, stiva_home, stop_worker):
    from stiva_tui.cli.warm import socket_path
    from stiva_tui.paths import private_dir

    path = socket_path()
    private_dir(path.parent)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # a worker that died without removing its socket: nobody listens
    dead.close()
    assert path.is_socket()
    result = run_stiva("ask", "Q", "--config", str(config), home=stiva_home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "forty-two"
    found = status()
    assert found is not None and found["served"] == 1
    stop_worker.append(found["pid"])
    assert stat_mode(path) == 0o600


def test_a_worker_of_another_config_is_replaced(config, fake, tmp_path, stiva_home, stop_worker):
    assert run_stiva("ask", "Q", "--config", str(config), home=stiva_home).returncode == 0
    first = status()
    stop_worker.append(first["pid"])
    other = write_warm_config(tmp_path / "other.toml", fake.base_url, idle_s=30)  # another config: another worker
    result = run_stiva("ask", "Q", "--config", str(other), home=stiva_home)
    assert result.returncode == 0, result.stderr
    second = status()
    assert second is not None and second["pid"] != first["pid"] and second["served"] == 1
    stop_worker.append(second["pid"])
    assert wait_until(lambda: not alive(first["pid"])), "the replaced worker stayed"


@pytest.mark.slow
def test_the_embedded_model_is_loaded_once_for_two_asks(model_cache, tmp_path, stiva_home, stop_worker):  # noqa: F811
    """The default config (conductor auto: the embedded model, offline): the second ask is answered
    by the worker that loaded it for the first, in a fraction of the first one's time."""
    config = tmp_path / "c.toml"
    config.write_text("catalog = false\n[discovery]\nenabled = false\n")
    started = time.monotonic()
    first = run_stiva("ask", "What is the capital of France?", "--config", str(config), "--json", home=stiva_home)
    cold_s = time.monotonic() - started
    assert first.returncode == 0, first.stderr
    worker = status()
    assert worker is not None
    stop_worker.append(worker["pid"])
    assert json.loads(first.stdout)["conductor"]["backend"] == "embedded"
    started = time.monotonic()
    second = run_stiva("ask", "What is the capital of Italy?", "--config", str(config), "--json", home=stiva_home)
    warm_s = time.monotonic() - started
    assert second.returncode == 0, second.stderr
    assert status()["pid"] == worker["pid"]
    assert warm_s < cold_s / 2, (cold_s, warm_s)


def test_a_front_ends_models_run_in_the_warm_worker_an_ask_started(
    config, stiva_home, stop_worker, tmp_path, monkeypatch
):
    """The app and `stiva serve` (a model process with `shared`) use the warm worker's models where
    one is up: no child of their own, and one copy of the weights per user. With STIVA_NO_WARM, or
    from another model cache, they start their own child as before; the worker stays either way."""
    from stiva_tui.cli import warm
    from stiva_tui.conductor.base import ConductorError
    from stiva_tui.conductor.local import LocalConductor
    from stiva_tui.config import ConductorConfig
    from stiva_tui.runtime import shared_models
    from stiva_tui.runtime.model_process import HostedConductor, ModelProcess
    from tests.support.procs import gone

    assert shared_models.WORKER_PROTOCOL == warm.PROTOCOL, "the front ends look for the worker on another socket"

    assert run_stiva("ask", "Q", "--config", str(config), home=stiva_home).returncode == 0
    worker = status()
    assert worker is not None, "no warm worker listens after the ask"
    stop_worker.append(worker["pid"])
    missing = ConductorConfig(backend="local", model=str(tmp_path / "no-such-model"))

    async def load_once() -> tuple[int | None, bool, str, int]:
        process = ModelProcess(tmp_path / "model-process.log", shared=True)
        conductor = HostedConductor(process, LocalConductor.from_config(missing), missing)
        try:
            with pytest.raises(ConductorError) as said:
                await conductor.load()
            during = await warm.worker_status()
            # what the status bar shows of the conductor says whose model it is
            assert bool(conductor.describe().get("warm_worker")) == process.on_worker
            return process.pid, process.on_worker, str(said.value), during["fronts"] if during else -1
        finally:
            await process.aclose()

    pid, on_worker, said, fronts = asyncio.run(load_once())
    assert (pid, on_worker, fronts) == (worker["pid"], True, 1), "the models did not run in the warm worker"
    assert "no-such-model" in said  # the worker's conductor said why, as a child's does
    assert wait_until(lambda: (status() or {}).get("fronts") == 0), "the worker still counts the closed front end"

    for name, value in (("STIVA_NO_WARM", "1"), ("STIVA_MODEL_CACHE", str(tmp_path / "another-cache"))):
        with monkeypatch.context() as env:
            env.setenv(name, value)
            pid, on_worker, said, _ = asyncio.run(load_once())
        assert pid not in (None, worker["pid"]) and not on_worker, f"{name}={value}: not a child of its own"
        assert "no-such-model" in said and gone(pid)
    again = status()
    assert again is not None and again["pid"] == worker["pid"], "a front end's hello retired the worker"

    # A socket whose listener runs as another user (the long-path folder is under /tmp) is not used:
    # its replies would be this process's plans and answers.
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    pid, on_worker, said, _ = asyncio.run(load_once())
    assert pid != worker["pid"] and not on_worker and gone(pid)
