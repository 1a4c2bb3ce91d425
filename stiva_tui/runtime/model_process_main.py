"""The model process (`python -m stiva_tui.runtime.model_process_main FD`): see model_process.py.

It reads requests from the socket FD its parent handed it and runs each as an in-process runtime
would: load a conductor, plan with it, or stream an answer of the embedded worker, one task each
(several at once, as in-process). It leaves when the socket closes. A frame that is no call of
model_wire.py's is answered with a `refused`, and nothing of it runs (core/wire.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from typing import Any

from pydantic_core import to_jsonable_python

from ..conductor.base import ConductorError
from ..core.wire import WireError, frame, read_frame
from ..pool.types import ProviderError
from .model_wire import (
    Call,
    Cancel,
    Chat,
    ConductorSpec,
    Delta,
    Done,
    Error,
    Event,
    Load,
    PlanCall,
    Preload,
    Progress,
    Refused,
    Reply,
    Requests,
)


def _build_conductor(spec: ConductorSpec) -> Any:
    if spec.backend == "embedded":
        from ..conductor.embedded import EmbeddedConductor

        return EmbeddedConductor.from_config(spec.config)
    if spec.backend == "local":
        from ..conductor.local import LocalConductor

        return LocalConductor.from_config(spec.config)
    raise ConductorError(f"the model process runs no {spec.backend} conductor")


def _facts(facts: dict[str, Any]) -> Any:
    """What a conductor says about itself, as JSON's values (a tuple as a list, a path or anything
    else as its text): facts for display and traces, which must not fail the call they end."""
    return to_jsonable_python(facts, fallback=str)


class Server:
    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.loop = asyncio.get_running_loop()
        self.conductors: dict[tuple[str, str], Any] = {}
        self.worker: Any = None
        self.tasks: dict[int, asyncio.Task[None]] = {}

    def send(self, message: Reply) -> None:
        if self.writer.is_closing():
            return
        try:
            self.writer.write(frame(message))
        except WireError as exc:  # too large to go: the call fails with why, rather than in silence
            if isinstance(message, Refused):
                raise
            self.writer.write(frame(Error(id=message.id, message=f"the model process cannot send its reply: {exc}")))

    def send_from_thread(self, message: Reply) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closing
            self.loop.call_soon_threadsafe(self.send, message)

    def conductor(self, spec: ConductorSpec) -> Any:
        # `prefer` is per question (the plan request carries it): a conductor built once serves them all
        key = (spec.backend, spec.config.model_dump_json(exclude={"prefer"}))
        if key not in self.conductors:
            self.conductors[key] = _build_conductor(spec)
        return self.conductors[key]

    def start(self, message: Call | Cancel) -> None:
        if isinstance(message, Cancel):
            task = self.tasks.get(message.id)
            if task is not None:
                task.cancel()
            return
        self.tasks[message.id] = asyncio.create_task(self.run(message))

    async def run(self, message: Call) -> None:
        call_id = message.id
        try:
            self.send(await self.handle(message))
        except asyncio.CancelledError:
            pass  # the caller left: it waits for nothing more
        except (ConductorError, ProviderError) as exc:
            self.send(Error(id=call_id, message=str(exc)))
        except Exception as exc:  # noqa: BLE001 - said to the caller, which raises its own error type
            self.send(Error(id=call_id, message=f"{type(exc).__name__}: {exc}"))
        finally:
            self.tasks.pop(call_id, None)

    async def handle(self, message: Call) -> Done:
        call_id = message.id
        if isinstance(message, Load):
            conductor = self.conductor(message.conductor)

            def progress(fraction: float | None, text: str) -> None:  # from the loading thread
                self.send_from_thread(Progress(id=call_id, fraction=fraction, message=text))

            await conductor.load(progress)
            return Done(id=call_id, describe=_facts(conductor.describe()))
        if isinstance(message, PlanCall):
            conductor = self.conductor(message.conductor)
            plan = await conductor.plan(message.request, on_delta=lambda text: self.send(Delta(id=call_id, text=text)))
            return Done(
                id=call_id, plan=plan, stats=_facts(conductor.last_stats), describe=_facts(conductor.describe())
            )
        if isinstance(message, Preload):
            return await self.preload(message)
        return await self.chat(message)

    def embedded_worker(self) -> Any:
        from ..pool.embedded import EmbeddedWorker

        if self.worker is None:
            self.worker = EmbeddedWorker()
        return self.worker

    async def preload(self, message: Preload) -> Done:
        """The embedded model loaded and warmed up before any question (the parent asks this at
        its start, where the pool is the embedded model alone): its first answer waits on neither."""
        await self.embedded_worker().warm_up()
        return Done(id=message.id)

    async def chat(self, message: Chat) -> Done:
        from ..pool.embedded import embedded_pool_model

        stream = self.embedded_worker().stream_chat(
            embedded_pool_model(),
            message.messages,
            max_tokens=message.max_tokens,
            temperature=message.temperature,
            stop=message.stop,
        )
        async with contextlib.aclosing(stream) as events:
            async for event in events:  # TextDelta and UsageReport, sent as they are
                self.send(Event(id=message.id, event=event))
        return Done(id=message.id)


async def serve(fd: int, preload: bool = False) -> None:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    await serve_stream(reader, writer, preload=preload)


async def serve_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, preload: bool = False) -> None:
    """Serve the calls of one parent until it goes: the child's socket pair, or a front end
    connected to the warm worker (runtime/shared_models.py). `preload` (`--preload`, the app's
    start): the embedded model loads and warms up at once, before any call asks for it, while
    the parent is still building its runtime; a call for it meanwhile waits on that load."""
    server = Server(writer)
    warming = None
    if preload:

        async def warm() -> None:
            with contextlib.suppress(Exception):  # a failure is said by the call that needs the model
                await server.embedded_worker().warm_up()

        warming = asyncio.create_task(warm(), name="stiva-model-preload")
    while True:
        try:
            message = await read_frame(reader, Requests)
        except EOFError:
            break
        except WireError as exc:  # nothing of it runs; the stream read on where it is still in step
            print(f"model process: refused a frame: {exc}", file=sys.stderr, flush=True)
            server.send(Refused(message=str(exc)))
            if not exc.in_step:
                break
            continue
        server.start(message)
    for task in [*server.tasks.values(), *([warming] if warming is not None else [])]:
        task.cancel()
    with contextlib.suppress(Exception):  # a last `refused` goes before the process does
        await writer.drain()


# The model process yields the CPU to the app: on a machine of few cores, a key typed while the
# model answers is drawn at once, and the answer waits those few milliseconds instead.
NICENESS = 5


def cpu_threads() -> int:
    """torch's CPU threads here: one fewer than the cores this process may run on, at least one.
    The app keeps a core for itself; and torch's threads wait for one another at every operation,
    so on a busy machine (other processes on every core) each operation waits for its slowest,
    descheduled thread, and an answer took many times as long as on one thread
    (benchmarks/perf/first_answer.json at commit bafa3f8: `two_threads`, the child as it was, against the rest)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def main(argv: list[str]) -> int:
    preload = argv[1:] == ["--preload"]
    if not argv or not argv[0].isdigit() or len(argv) > 1 + preload:
        print(
            "usage: python -m stiva_tui.runtime.model_process_main FD [--preload] (started by Stiva)", file=sys.stderr
        )
        return 2
    with contextlib.suppress(OSError, AttributeError):
        os.nice(NICENESS)
    os.environ.setdefault("OMP_NUM_THREADS", str(cpu_threads()))  # before torch is imported; a user's own wins
    asyncio.run(serve(int(argv[0]), preload))
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # a generation thread still running must not keep the process
