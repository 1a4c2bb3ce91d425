"""The models Stiva loads itself, in a process of their own (stiva_tui/runtime/model_process.py):
real child processes, the real embedded model where a test says `model`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from stiva_tui.conductor.base import ConductorError
from stiva_tui.config import ConductorConfig, parse_config
from stiva_tui.runtime.model_process import HostedConductor, HostedWorker, ModelProcess
from tests.conftest_model import model_cache  # noqa: F401  (session fixture: the converted model)
from tests.support.procs import gone


def _missing_local(tmp_path) -> tuple[ConductorConfig, str]:
    """A local conductor whose model folder is missing, and what it says in this process."""
    from stiva_tui.conductor.local import LocalConductor

    config = ConductorConfig(backend="local", model=str(tmp_path / "no-such-model"))
    with pytest.raises(ConductorError) as said:
        asyncio.run(LocalConductor.from_config(config).load())
    return config, str(said.value)


def _hosted_local(process: ModelProcess, config: ConductorConfig) -> HostedConductor:
    from stiva_tui.conductor.local import LocalConductor

    return HostedConductor(process, LocalConductor.from_config(config), config)


def test_a_conductor_that_cannot_load_says_why_from_its_own_process(tmp_path):
    config, in_process = _missing_local(tmp_path)

    async def scenario():
        process = ModelProcess(tmp_path / "model-process.log")
        conductor = _hosted_local(process, config)
        try:
            with pytest.raises(ConductorError) as said:
                await conductor.load()
            assert str(said.value) == f"local conductor: {in_process}"
            assert process.alive and process.pid not in (None, os.getpid())
            assert not conductor.loaded
            return process.pid
        finally:
            await process.aclose()

    pid = asyncio.run(scenario())
    assert gone(pid), "the model process outlived the runtime that closed it"
    assert "model process started" in (tmp_path / "model-process.log").read_text()


def test_a_killed_model_process_is_started_again_by_the_next_call(tmp_path):
    config, in_process = _missing_local(tmp_path)

    async def scenario():
        process = ModelProcess(tmp_path / "model-process.log")
        conductor = _hosted_local(process, config)
        try:
            with pytest.raises(ConductorError):
                await conductor.load()
            first = process.pid
            os.kill(first, signal.SIGKILL)
            assert await asyncio.to_thread(gone, first)
            with pytest.raises(ConductorError) as said:  # the same answer, from a new child
                await conductor.load()
            assert str(said.value) == f"local conductor: {in_process}"
            assert process.generation == 2 and process.pid not in (None, first)
        finally:
            await process.aclose()

    asyncio.run(scenario())


def test_the_model_process_leaves_when_the_app_dies_without_closing_it(tmp_path):
    """The app killed (or crashed): its socket closes and the child exits, leaving no model in
    memory behind it."""
    config = ConductorConfig(backend="local", model=str(tmp_path / "no-such-model"))
    script = textwrap.dedent(
        f"""
        import asyncio, os
        from stiva_tui.config import ConductorConfig
        from stiva_tui.conductor.local import LocalConductor
        from stiva_tui.runtime.model_process import HostedConductor, ModelProcess

        async def main():
            config = ConductorConfig.model_validate_json({config.model_dump_json()!r})
            process = ModelProcess()
            conductor = HostedConductor(process, LocalConductor.from_config(config), config)
            try:
                await conductor.load()
            except Exception:
                pass
            print(process.pid, flush=True)
            os._exit(0)  # no aclose: as if killed

        asyncio.run(main())
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    child = int(out.stdout.split()[-1])
    assert child != os.getpid()
    assert gone(child), "the model process outlived the app that started it"


def test_the_model_process_leaves_a_core_to_the_app(monkeypatch):
    """torch in the child runs one thread fewer than the cores it may use (one on 2 cores): the
    app keeps a core, and on busy cores no operation waits for a second, descheduled thread. The
    count is set before torch is imported; one the user set wins."""
    from stiva_tui.runtime import model_process_main

    for cores, threads in ((1, 1), (2, 1), (16, 15)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert model_process_main.cpu_threads() == threads
    monkeypatch.undo()
    script = textwrap.dedent(
        """
        import os, socket, sys
        from stiva_tui.runtime import model_process_main

        mine, parent = socket.socketpair()
        parent.close()  # the parent went at once: the child serves nothing and returns
        assert model_process_main.main([str(mine.fileno())]) == 0
        print(os.environ["OMP_NUM_THREADS"], "torch" in sys.modules)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [str(model_process_main.cpu_threads()), "False"]
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env={**env, "OMP_NUM_THREADS": "3"}
    )
    assert out.stdout.split() == ["3", "False"], out.stderr[-2000:]


def test_the_app_config_runs_models_in_their_own_process_by_default():
    assert parse_config({}).model_process is True
    assert parse_config({"model_process": False}).model_process is False


# --- with the real embedded model ---------------------------------------------------------------


def _embedded_config():
    return parse_config({"conductor": {"backend": "embedded"}, "discovery": {"enabled": False}, "catalog": False})


@pytest.mark.model
def test_the_embedded_model_answers_from_its_own_process(model_cache):  # noqa: F811
    from stiva_tui.runtime import Ask, Runtime

    async def scenario():
        runtime = await Runtime.create(_embedded_config(), model_process=True, with_store=False)
        try:
            said: list[str] = []
            conductor = await runtime.ensure_conductor(lambda fraction, message: said.append(message))
            assert conductor.loaded and conductor.backend == "embedded"
            facts = conductor.describe()
            assert facts["process"] not in (None, os.getpid()) and facts["quantization"] == "bf16"
            assert facts["memory_mb"] > 100 and facts["load_s"] > 0  # the child's own load, reported
            assert any("ready" in m for m in said), said  # its progress reached this process
            outcome = await runtime.sessions.ask(Ask("What is the capital of France?"))
            assert outcome.result.status == "finished", outcome.result.error
            assert "Paris" in outcome.result.answer
            return facts["process"]
        finally:
            await runtime.aclose()

    pid = asyncio.run(scenario())
    assert gone(pid)


@pytest.mark.model
def test_a_hosted_plan_is_the_plan_written_in_process(model_cache):  # noqa: F811
    """The child runs the same conductor: the same greedy plan, token for token, and its text
    streams back as it is written."""
    from stiva_tui.conductor.base import PlanRequest, WorkerInfo
    from stiva_tui.conductor.embedded import EmbeddedConductor

    config = ConductorConfig(backend="embedded")
    request = PlanRequest(
        question="Write a short poem about the sea, then check its rhyme scheme and fix it.",
        workers=[
            WorkerInfo(id="lab/big", description="a strong general model", price_in=3.0, price_out=15.0),
            WorkerInfo(id="local/gemma-3-270m", description="a tiny offline model", kind="embedded"),
        ],
        max_steps=2,
    )

    async def scenario():
        here = EmbeddedConductor.from_config(config)
        expected = await here.plan(request)
        process = ModelProcess()
        hosted = HostedConductor(process, EmbeddedConductor.from_config(config), config)
        deltas: list[str] = []
        try:
            plan = await hosted.plan(request, on_delta=deltas.append)
        finally:
            await process.aclose()
        return expected, plan, deltas, hosted.last_stats

    expected, plan, deltas, stats = asyncio.run(scenario())
    assert plan.raw_text == expected.raw_text and plan.workflow == expected.workflow
    assert plan.usage == expected.usage
    assert len(deltas) > 1 and "".join(deltas).strip() in plan.raw_text
    assert stats["completion_tokens"] == expected.usage.completion_tokens


async def _first_delta_then(worker: HostedWorker, model, after) -> list:
    """Stream a long answer; after its first text, `after()`; the events read until it ends."""
    messages = [{"role": "user", "content": "Once upon a time, in a land far away, there"}]
    events = []
    stream = worker.stream_chat(model, messages, max_tokens=200, temperature=0.0)
    async with contextlib.aclosing(stream) as items:
        async for event in items:
            events.append(event)
            if len(events) == 1:
                await after()
    return events


@pytest.mark.model
def test_an_answer_cut_short_and_a_killed_model_process_say_so_and_the_next_answers(model_cache):  # noqa: F811
    from stiva_tui.pool.embedded import embedded_pool_model
    from stiva_tui.pool.types import ProviderError, TextDelta, UsageReport

    model = embedded_pool_model()

    async def scenario():
        process = ModelProcess()
        worker = HostedWorker(process)
        try:
            # The caller stops reading: the child stops generating and stays up.
            stream = worker.stream_chat(model, [{"role": "user", "content": "Once upon a time"}], max_tokens=200)
            first = await anext(stream)
            await stream.aclose()
            assert isinstance(first, TextDelta)
            pid = process.pid
            # The child killed mid-answer: the answer fails with why, and not in silence.
            with pytest.raises(ProviderError) as said:
                await _first_delta_then(worker, model, lambda: asyncio.to_thread(os.kill, pid, signal.SIGKILL))
            assert "the model process was killed (signal 9)" in str(said.value)
            assert "next question starts it again" in str(said.value)
            # The next answer starts a new child, loads the model again and answers whole.
            events = [e async for e in worker.stream_chat(model, [{"role": "user", "content": "Hello"}], max_tokens=8)]
            assert isinstance(events[-1], UsageReport) and events[-1].usage.completion_tokens > 0
            assert process.generation == 2 and process.pid != pid
        finally:
            await process.aclose()

    asyncio.run(scenario())


@pytest.mark.model
def test_stiva_serve_answers_the_openai_client_from_its_model_process(model_cache, tmp_path, stiva_home):  # noqa: F811
    """The real `stiva serve` on the embedded model: the server's process never imports torch,
    its child answers, and the child leaves with the server."""
    import openai
    import tomli_w

    from tests.support import procs
    from tests.support.cli import STIVA

    config = tmp_path / "offline.toml"
    config.write_text(
        tomli_w.dumps({"conductor": {"backend": "embedded"}, "discovery": {"enabled": False}, "catalog": False})
    )
    port = procs.free_port()
    env = {**os.environ, "STIVA_HOME": str(stiva_home), "STIVA_MODEL_CACHE": str(model_cache), "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen(
        [STIVA, "serve", "--no-auth", "--port", str(port), "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        said = procs.read_until(server.stderr, "conductor:", 120)
        assert "conductor: embedded" in said, said
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", timeout=120)
        reply = client.chat.completions.create(
            model="conductor", messages=[{"role": "user", "content": "What is the capital of France?"}]
        )
        assert "Paris" in reply.choices[0].message.content
        (child,) = [pid for pid in procs.children(server.pid) if "model_process_main" in procs.command_line(pid)]
        assert procs.maps_torch(child) and not procs.maps_torch(server.pid)
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert gone(child), "the model process outlived the server"
