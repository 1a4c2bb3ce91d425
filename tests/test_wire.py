"""No pickle crosses a socket (stiva_tui/core/wire.py): the warm `stiva ask` worker's socket and the
model process's socket pair carry JSON frames, read back only as their own typed messages.

The exploit is the one a "Stiva types only" unpickler let through: a protocol-4 pickle whose global
is `stiva_tui.core.files` + `os.system` (a dotted name, which protocol 4 resolves through that
module's own `os`). It is sent, as a frame, to the real warm worker and to the real model process;
it must run nothing (the command would touch a file), be answered with a typed `refused`, and leave
both serving. Every message of both sockets round-trips; frames that are not JSON, not a message,
or too long are refused with a clear line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import get_args

import pytest
from test_ask_warm import alive, wait_until, warm_allowed  # noqa: F401 - warm_allowed: the autouse fixture
from test_ask_warm import status as worker_status

from tests.support.cli import run_stiva
from tests.support.warm import warm_pool


def exploit_pickle(command: str) -> bytes:
    """A protocol-4 pickle that runs `command` when unpickled, through `stiva_tui.core.files`'s `os`."""

    def text(value: str) -> bytes:  # BINUNICODE: its length, then its UTF-8
        data = value.encode()
        return b"X" + struct.pack("<I", len(data)) + data

    # PROTO 4, the module and the dotted name, STACK_GLOBAL, the argument, TUPLE1, REDUCE, STOP
    return b"\x80\x04" + text("stiva_tui.core.files") + text("os.system") + b"\x93" + text(command) + b"\x85R."


def as_frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def read_reply(sock: socket.socket, timeout: float = 30.0) -> bytes | None:
    """The body of the next frame on `sock`; None where it closed first."""
    sock.settimeout(timeout)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data[4 : 4 + struct.unpack(">I", data[:4])[0]]


# --- the warm worker ----------------------------------------------------------------------------


@pytest.fixture
def worker(fake, tmp_path, stiva_home):
    """A real warm worker, started by a real `stiva ask`; (its status, the config); stopped after."""
    config = warm_pool(fake, tmp_path / "c.toml")
    first = run_stiva("ask", "What is six times seven?", "--config", str(config), home=stiva_home)
    assert first.returncode == 0, first.stderr
    # the worker the ask started may still be starting on a loaded machine
    wait_until(lambda: worker_status() is not None, 60)
    found = worker_status()
    assert found is not None, "no warm worker listens after the first ask"
    yield found, config
    if alive(found["pid"]):
        os.kill(found["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 30
        while alive(found["pid"]) and time.monotonic() < deadline:
            time.sleep(0.1)


def send_to_worker(body: bytes) -> bytes | None:
    """`body` as one frame to the worker's socket; the body of its reply (None: it closed)."""
    from stiva_tui.cli.warm import socket_path

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(socket_path()))
        sock.sendall(as_frame(body))
        return read_reply(sock)


def test_a_pickle_sent_to_the_warm_worker_runs_nothing_and_is_refused(worker, tmp_path):
    found, _ = worker
    touched = tmp_path / "the-pickle-ran"
    reply = send_to_worker(exploit_pickle(f"touch {touched}"))
    time.sleep(0.3)  # a command started by the worker would have touched it by now
    assert not touched.exists(), "the pickle sent to the warm worker ran its command"

    from stiva_tui.cli.warm import FromWorker, Refused
    from stiva_tui.core.wire import decode

    assert reply is not None, "the worker closed without saying why"
    refused = decode(reply, FromWorker)
    assert isinstance(refused, Refused) and "pickle" in refused.message
    again = worker_status()  # and it serves on
    assert again is not None and again["pid"] == found["pid"]
    from stiva_tui.cli.warm import socket_path

    path = socket_path()
    log = path.with_name(path.name.removesuffix(".sock") + ".log")
    assert "refused a frame: a pickle" in log.read_text()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"\x00\xffnot json", "not a JSON message"),
        (b'{"t": "hello"}', "hello.fingerprint: Field required"),
        (b'{"t": "shell", "command": "touch x"}', "does not match any of the expected tags"),
        (b'{"t": "hello", "fingerprint": "x", "extra": 1}', "hello.extra: Extra inputs are not permitted"),
        (b"[1, 2]", "not a message of this socket's"),
    ],
)
def test_malformed_frames_are_refused_and_the_worker_serves_on(worker, body, said):
    from stiva_tui.cli.warm import FromWorker, Refused
    from stiva_tui.core.wire import decode

    found, _ = worker
    reply = send_to_worker(body)
    assert reply is not None
    refused = decode(reply, FromWorker)
    assert isinstance(refused, Refused) and said in refused.message and "\n" not in refused.message
    assert worker_status()["pid"] == found["pid"]


def test_an_oversized_frame_is_refused_unread_and_the_worker_serves_on(worker):
    from stiva_tui.cli.warm import FromWorker, Refused, socket_path
    from stiva_tui.core.wire import MAX_FRAME_BYTES, decode

    found, _ = worker
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(socket_path()))
        sock.sendall(struct.pack(">I", 0xFFFFFFFF) + b"{")  # 4 GiB promised: not waited for
        reply = read_reply(sock, timeout=10)
    assert reply is not None
    refused = decode(reply, FromWorker)
    assert isinstance(refused, Refused) and f"over the {MAX_FRAME_BYTES:,}-byte limit" in refused.message
    assert worker_status()["pid"] == found["pid"]


def test_an_ask_through_the_worker_streams_typed_events(worker, stiva_home):
    """The live view's path (the CLI's tests ask without a terminal, so no events): the real worker
    sends the run's events as tagged JSON, read back as the engine's own dataclasses."""
    from stiva_tui.cli import ask as ask_cli
    from stiva_tui.cli import warm
    from stiva_tui.core import events

    found, config = worker
    options = {"config": str(config.resolve()), "pool": None, "conductor": None, "prefer": None}
    args = argparse.Namespace(json=False, rounds=None, max_steps=None, budget_usd=None, budget_tokens=None)
    args.baseline = args.preset = args.continue_id = None

    async def scenario():
        reader, writer = await asyncio.open_unix_connection(str(warm.socket_path()))
        try:
            writer.write(warm.frame(warm.Hello(fingerprint=warm.fingerprint(options))))
            assert isinstance(await warm._read(reader), warm.Ok)
            ask = warm.AskRequest(question="And seven times six?", options=ask_cli.options_of(args), live=True)
            writer.write(warm.frame(ask))
            said = []
            while not said or not isinstance(said[-1], (warm.Done, warm.Fail)):
                said.append(await asyncio.wait_for(warm._read(reader), 60))
            return said
        finally:
            writer.close()

    said = asyncio.run(scenario())
    assert isinstance(said[-1], warm.Done), said[-1]
    assert said[-1].done["status"] == "finished" and said[-1].done["answer"] == "forty-two"
    kinds = [type(m.event) for m in said if isinstance(m, warm.RunEvent)]
    assert kinds[0] is events.RunStarted and kinds[-1] is events.RunFinished
    assert {events.WorkflowReady, events.StepStarted, events.StepFinished} <= set(kinds)
    ready = next(m.event for m in said if isinstance(m, warm.RunEvent) and isinstance(m.event, events.WorkflowReady))
    assert ready.workflow.steps[0].subtask == "answer it" and isinstance(ready.workflow.steps[0].access, tuple)
    assert [m.on for m in said if isinstance(m, warm.View)] == [True, False]
    assert worker_status()["served"] == 2


# --- the model process ----------------------------------------------------------------------------


@contextlib.contextmanager
def model_process_child(tmp_path):
    """The real model process (`python -m stiva_tui.runtime.model_process_main FD`) on a socket pair."""
    parent, child = socket.socketpair()
    log = open(tmp_path / "model-process.log", "w")  # noqa: SIM115 - the child's
    proc = subprocess.Popen(
        [sys.executable, "-m", "stiva_tui.runtime.model_process_main", str(child.fileno())],
        pass_fds=(child.fileno(),),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    child.close()
    log.close()
    try:
        yield parent, proc
    finally:
        parent.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def remote_load(call_id: int) -> bytes:
    """A call the child answers at once, loading nothing: a conductor it does not run."""
    from stiva_tui.config import ConductorConfig
    from stiva_tui.core.wire import frame
    from stiva_tui.runtime.model_wire import ConductorSpec, Load

    return frame(Load(id=call_id, conductor=ConductorSpec(backend="remote", config=ConductorConfig())))


def test_a_pickle_sent_to_the_model_process_runs_nothing_and_is_refused(tmp_path):
    touched = tmp_path / "the-pickle-ran"
    with model_process_child(tmp_path) as (sock, proc):
        sock.sendall(as_frame(exploit_pickle(f"touch {touched}")))
        reply = read_reply(sock)
        time.sleep(0.3)
        assert not touched.exists(), "the pickle sent to the model process ran its command"

        from stiva_tui.core.wire import decode
        from stiva_tui.runtime.model_wire import Error, Refused, Replies

        assert reply is not None, "the model process closed without saying why"
        refused = decode(reply, Replies)
        assert isinstance(refused, Refused) and "pickle" in refused.message
        sock.sendall(remote_load(7))  # and it serves on
        answer = decode(read_reply(sock), Replies)
        assert isinstance(answer, Error) and answer.id == 7 and "runs no remote conductor" in answer.message
        assert proc.poll() is None
    assert "refused a frame: a pickle" in (tmp_path / "model-process.log").read_text()


def test_the_model_process_refuses_malformed_frames_and_leaves_on_an_oversized_one(tmp_path):
    from stiva_tui.core.wire import decode
    from stiva_tui.runtime.model_wire import Error, Refused, Replies

    with model_process_child(tmp_path) as (sock, proc):
        for body, said in [
            (b"{", "not a JSON message"),
            (b'{"t": "chat", "id": 1}', "chat.messages: Field required"),
            (b'{"t": "plan", "id": 2, "conductor": {"backend": "local", "config": {"nope": 1}}}', "Extra inputs"),
        ]:
            sock.sendall(as_frame(body))
            refused = decode(read_reply(sock), Replies)
            assert isinstance(refused, Refused) and said in refused.message, refused
        sock.sendall(remote_load(3))
        assert isinstance(decode(read_reply(sock), Replies), Error)
        # A length over the limit leaves the stream out of step: refused, and the child leaves
        # (its parent starts another for the next call).
        sock.sendall(struct.pack(">I", 0xFFFFFFFF))
        refused = decode(read_reply(sock), Replies)
        assert isinstance(refused, Refused) and "over the" in refused.message
        assert proc.wait(timeout=30) == 0


def test_the_parent_stops_a_model_process_that_sends_what_it_does_not_read(tmp_path):
    """A reply that is no message: the calls waiting hear why, and the child is stopped."""
    from stiva_tui.runtime.model_process import ModelProcess
    from stiva_tui.runtime.model_wire import Gone

    async def scenario():
        process = ModelProcess(tmp_path / "model-process.log")
        try:
            await process._ensure()
            proc = process._proc
            process._reader_task.cancel()  # what the child says is read below instead
            with contextlib.suppress(asyncio.CancelledError):
                await process._reader_task
            waiting: asyncio.Queue = asyncio.Queue()
            process._calls[99] = waiting
            reader = asyncio.StreamReader()
            reader.feed_data(as_frame(exploit_pickle(f"touch {tmp_path / 'ran'}")))
            await asyncio.wait_for(process._read_replies(reader, proc), 30)
            return waiting.get_nowait(), proc
        finally:
            await process.aclose()

    gone, proc = asyncio.run(scenario())
    assert isinstance(gone, Gone) and "sent a frame Stiva does not read (a pickle" in gone.message
    assert proc.returncode is not None and not (tmp_path / "ran").exists()


# --- every message round-trips --------------------------------------------------------------------


def _events():
    from stiva_tui.core import events as ev
    from stiva_tui.core.usage import Usage
    from stiva_tui.core.workflow import Step, Workflow

    workflow = Workflow(
        (Step(0, "draft it", ()), Step(1, "check it", (0,), access_all=True), Step(0, "vote", (0, 1), kind="vote"))
    )
    totals = ev.Totals(12, 5, 0.0012, 1.5, estimated=True, conductor_tokens=7, conductor_cost_usd=0.0004)
    return [
        ev.RunStarted("r1", "Why?", "conductor", "embedded", "gemma", "offline", "conductor", "cli", "c1", "lora"),
        ev.RoundStarted("r1", 1),
        ev.ConductorDelta("r1", 1, "model_id = [0"),
        ev.WorkflowReady("r1", 1, workflow, "because", Usage(3, 4, True), 0.25, False, "a note", "cheap"),
        ev.PlanEstimated(
            "r1",
            1,
            (
                ev.StepEstimate(0, "lab/a", 120, 400, 0.00092, 1.0, 2.0, "history"),
                ev.StepEstimate(1, "vote", 0, 0, 0.0),
            ),
            0.00092,
            0.01,
            0.0001,
            1,
            "cut to 1 of 2 steps",
        ),
        ev.StepStarted("r1", 1, 0, "lab/a", "draft it", (), attempt=2, writes_answer=True, final=True),
        ev.StepDelta("r1", 1, 0, "forty ✓ "),
        ev.StepFinished("r1", 1, 0, "lab/a", "forty-two", Usage(5, 2), 0.0001, 0.5, 1),
        ev.StepFailed("r1", 1, 1, "lab/b", "timed out", 1, fallback="lab/a"),
        ev.StepSkipped("r1", 1, 2, "lab/b", "the answers agreed"),
        ev.RunFinished("r1", "forty-two", totals),
        ev.RunFailed("r1", "over budget", totals, "budget"),
        ev.SubscriberFailed("r1", "history", "disk full"),
        ev.RunCancelled("r1", totals),
    ]


def _warm_messages():
    from stiva_tui.cli import warm

    plain = {"status": "finished", "answer": "42", "trouble": None, "totals": [1, 2, False, 0.5, 1.25], "live": True}
    return [
        warm.Hello(fingerprint="abc"),
        warm.ModelsHello(fingerprint="abc"),
        warm.StatusQuery(),
        warm.AskRequest(
            question="Q?", options={"json": False, "rounds": 2, "budget_usd": 0.5, "baseline": None}, live=True
        ),
        warm.Cancel(),
        warm.WorkerState(pid=1, served=2, active=0),
        warm.WorkerState(pid=1, served=2, active=1, fronts=1),
        warm.Ok(pid=3),
        warm.Other(),
        warm.Say(markup="[yellow]warning:[/] x", kwargs={"highlight": False, "soft_wrap": True}),
        warm.Status(text="planning…"),
        warm.Status(text=None),
        warm.View(on=True),
        *[warm.RunEvent(event=event) for event in _events()],
        warm.Done(done=plain),
        warm.Fail(message="no such model", code=2),
        warm.Cancelled(trouble=None),
        warm.Refused(message="a pickle"),
    ]


def _model_messages():
    from stiva_tui.conductor.base import Plan, PlanRequest, PreviousRound, WorkerInfo
    from stiva_tui.config import ConductorConfig
    from stiva_tui.core.preference import parse_preference
    from stiva_tui.core.usage import Usage
    from stiva_tui.core.workflow import Step, Workflow
    from stiva_tui.pool.types import TextDelta, UsageReport
    from stiva_tui.runtime import model_wire as mw

    workflow = Workflow((Step(1, "solve", ()), Step(0, "check", (0,))))
    spec = mw.ConductorSpec(
        backend="local", config=ConductorConfig(backend="local", model="/m", prefer=0.4, temperature=0.5)
    )
    request = PlanRequest(
        question="Q?",
        workers=[  # lists: a Sequence is read back as one
            WorkerInfo("lab/a", "strong", price_in=3.0, price_out=15.0, latency_s=1.5),
            WorkerInfo("e", "tiny", "embedded"),
        ],
        max_steps=3,
        conversation=[{"role": "user", "content": "earlier"}],
        round=2,
        previous=PreviousRound(workflow, "an answer", ("lab/a", "e")),
        preference=parse_preference("cheap"),
    )
    plan = Plan(workflow, "why", "why\nmodel_id = [1, 0]", Usage(30, 12), 0.8, 2)
    return [
        mw.Load(id=1, conductor=spec),
        mw.PlanCall(id=2, conductor=spec, request=request),
        mw.Chat(id=3, messages=[{"role": "user", "content": "hi"}], max_tokens=8, temperature=0.0, stop=["\n"]),
        mw.Cancel(id=3),
        mw.Preload(id=4),
        mw.Progress(id=1, fraction=0.5, message="loading"),
        mw.Progress(id=1, fraction=None, message="ready"),
        mw.Delta(id=2, text="model_id"),
        mw.Event(id=3, event=TextDelta("Hel")),
        mw.Event(id=3, event=UsageReport(Usage(4, 1))),
        mw.Done(id=1, describe={"backend": "local", "memory_mb": 512.5, "adapter": None}),
        mw.Done(id=2, plan=plan, stats={"completion_tokens": 12, "finish": "stop"}, describe={"backend": "local"}),
        mw.Done(id=3),
        mw.Error(id=3, message="out of memory"),
        mw.Refused(message="a pickle"),
    ]


def _round_trip(messages, *adapters):
    """Each message framed and read back: by exactly one of `adapters` (a socket's two directions), as itself."""
    from stiva_tui.core.wire import HEADER, WireError, decode, frame

    for message in messages:
        data = frame(message)
        assert HEADER.unpack(data[:4])[0] == len(data) - 4
        read = []
        for adapter in adapters:
            with contextlib.suppress(WireError):
                read.append(decode(data[4:], adapter))
        assert read == [message], message


def test_every_warm_message_round_trips():
    from stiva_tui.cli import warm

    messages = _warm_messages()
    assert {type(m) for m in messages} == {*get_args(warm.ToWorkerMessage), *get_args(warm.FromWorkerMessage)}
    assert {type(m.event) for m in messages if isinstance(m, warm.RunEvent)} == set(warm.EVENT_TYPES)
    _round_trip(messages, warm.ToWorker, warm.FromWorker)


def test_every_model_process_message_round_trips():
    from stiva_tui.runtime import model_wire as mw

    messages = _model_messages()
    assert {type(m) for m in messages} == {*get_args(mw.Request), *get_args(mw.Reply)}
    _round_trip(messages, mw.Requests, mw.Replies)
    back = mw.Requests.validate_json(messages[1].model_dump_json())
    assert back.request.previous.workflow.steps[1].access == (0,) and back.request.preference.name == "cheap"


def test_a_tagged_value_names_only_its_own_classes():
    from stiva_tui.cli import warm
    from stiva_tui.core.wire import WireError, decode

    for name in ("Event", "Totals", "os.system", "stiva_tui.core.files.os.system", "PoolModel"):
        with pytest.raises(WireError, match="does not match any of the expected tags"):
            decode(b'{"t": "event", "event": {"type": "%s", "run_id": "r"}}' % name.encode(), warm.FromWorker)


def test_text_json_cannot_carry_goes_as_the_replacement_character_and_floats_keep_inf_and_nan():
    from stiva_tui.cli import warm
    from stiva_tui.core import events
    from stiva_tui.core.wire import decode, frame

    broken = warm.RunEvent(event=events.StepDelta("r", 1, 0, "ok \udc80 ok"))  # a provider's "\udc80"
    back = decode(frame(broken)[4:], warm.FromWorker)
    assert back.event.text == "ok \ufffd ok"
    totals = events.Totals(cost_usd=math.inf, latency_s=math.nan)
    back = decode(frame(warm.RunEvent(event=events.RunCancelled("r", totals)))[4:], warm.FromWorker)
    assert back.event.totals.cost_usd == math.inf and math.isnan(back.event.totals.latency_s)


def test_a_message_over_the_limit_is_not_sent(monkeypatch):
    from stiva_tui.cli import warm
    from stiva_tui.core import wire

    monkeypatch.setattr(wire, "MAX_FRAME_BYTES", 1000)
    with pytest.raises(wire.WireError, match="over the 1,000-byte limit"):
        wire.frame(warm.Say(markup="x" * 2000, kwargs={}))


def test_a_conductors_facts_go_as_json_values_and_never_fail_the_call():
    """describe() and last_stats are for display and traces: a tuple, a path or an object there
    goes as JSON can carry it, rather than failing the load or plan it ends."""
    from stiva_tui.core.wire import decode, frame
    from stiva_tui.runtime.model_process_main import _facts
    from stiva_tui.runtime.model_wire import Done, Replies

    facts = _facts({"eos_ids": (1, 106), "folder": Path("/models/m"), "device": object(), "memory_mb": 784.3})
    back = decode(frame(Done(id=1, describe=facts))[4:], Replies)
    assert back.describe["eos_ids"] == [1, 106] and back.describe["folder"] == "/models/m"
    assert back.describe["device"].startswith("<object") and back.describe["memory_mb"] == 784.3
