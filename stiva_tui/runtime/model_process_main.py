"""The model process (`python -m stiva_tui.runtime.model_process_main FD`): see model_process.py.

It reads requests from the socket FD its parent handed it and runs each as an in-process runtime
would: load a conductor, plan with it, or stream an answer of the embedded worker, one task each
(several at once, as in-process). It leaves when the socket closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import socket
import sys
from typing import Any

from ..conductor.base import ConductorError
from ..core.wire import frame, read_frame
from ..pool.types import ProviderError
from .model_process import Message


def _build_conductor(spec: Message) -> Any:
    if spec["backend"] == "embedded":
        from ..conductor.embedded import EmbeddedConductor

        return EmbeddedConductor.from_config(spec["config"])
    if spec["backend"] == "local":
        from ..conductor.local import LocalConductor

        return LocalConductor.from_config(spec["config"])
    raise ConductorError(f"the model process runs no {spec['backend']} conductor")


class Server:
    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.loop = asyncio.get_running_loop()
        self.conductors: dict[tuple[str, str], Any] = {}
        self.worker: Any = None
        self.tasks: dict[int, asyncio.Task[None]] = {}

    def send(self, message: Message) -> None:
        if not self.writer.is_closing():
            self.writer.write(frame(message))

    def send_from_thread(self, message: Message) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closing
            self.loop.call_soon_threadsafe(self.send, message)

    def conductor(self, spec: Message) -> Any:
        key = (spec["backend"], spec["config"].model_dump_json())
        if key not in self.conductors:
            self.conductors[key] = _build_conductor(spec)
        return self.conductors[key]

    def start(self, message: Message) -> None:
        call_id = message["id"]
        if message["t"] == "cancel":
            task = self.tasks.get(call_id)
            if task is not None:
                task.cancel()
            return
        self.tasks[call_id] = asyncio.create_task(self.run(call_id, message))

    async def run(self, call_id: int, message: Message) -> None:
        try:
            reply = await self.handle(call_id, message)
            self.send({"t": "done", "id": call_id, **reply})
        except asyncio.CancelledError:
            pass  # the caller left: it waits for nothing more
        except (ConductorError, ProviderError) as exc:
            self.send({"t": "error", "id": call_id, "message": str(exc)})
        except Exception as exc:  # noqa: BLE001 - said to the caller, which raises its own error type
            self.send({"t": "error", "id": call_id, "message": f"{type(exc).__name__}: {exc}"})
        finally:
            self.tasks.pop(call_id, None)

    async def handle(self, call_id: int, message: Message) -> Message:
        kind = message["t"]
        if kind == "load":
            conductor = self.conductor(message["conductor"])

            def progress(fraction: float | None, text: str) -> None:  # from the loading thread
                self.send_from_thread({"t": "progress", "id": call_id, "fraction": fraction, "message": text})

            await conductor.load(progress)
            return {"describe": conductor.describe()}
        if kind == "plan":
            conductor = self.conductor(message["conductor"])
            plan = await conductor.plan(
                message["request"], on_delta=lambda text: self.send({"t": "delta", "id": call_id, "text": text})
            )
            return {"plan": plan, "stats": conductor.last_stats, "describe": conductor.describe()}
        if kind == "chat":
            return await self.chat(call_id, message)
        if kind == "preload":
            return await self.preload()
        raise ValueError(f"unknown request {kind!r}")

    def embedded_worker(self) -> Any:
        from ..pool.embedded import EmbeddedWorker

        if self.worker is None:
            self.worker = EmbeddedWorker()
        return self.worker

    async def preload(self) -> Message:
        """The embedded model loaded and warmed up before any question (the parent asks this at
        its start, where the pool is the embedded model alone): its first answer waits on neither."""
        await self.embedded_worker().warm_up()
        return {}

    async def chat(self, call_id: int, message: Message) -> Message:
        from ..pool.embedded import embedded_pool_model

        stream = self.embedded_worker().stream_chat(
            embedded_pool_model(),
            message["messages"],
            max_tokens=message["max_tokens"],
            temperature=message["temperature"],
            stop=message["stop"],
        )
        async with contextlib.aclosing(stream) as events:
            async for event in events:  # TextDelta and UsageReport, sent as they are
                self.send({"t": "event", "id": call_id, "event": event})
        return {}


async def serve(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    await serve_stream(reader, writer)


async def serve_stream(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, unpickler: type[pickle.Unpickler] = pickle.Unpickler
) -> None:
    """Serve the requests of one parent until it goes: the child's socket pair, or a front end
    connected to the warm worker (runtime/shared_models.py), which reads with its own `unpickler`."""
    server = Server(writer)
    while True:
        try:
            message = await read_frame(reader, unpickler)
        except EOFError:
            break
        server.start(message)
    for task in list(server.tasks.values()):
        task.cancel()


# The model process yields the CPU to the app: on a machine of few cores, a key typed while the
# model answers is drawn at once, and the answer waits those few milliseconds instead.
NICENESS = 5


def cpu_threads() -> int:
    """torch's CPU threads here: one fewer than the cores this process may run on, at least one.
    The app keeps a core for itself; and torch's threads wait for one another at every operation,
    so on a busy machine (other processes on every core) each operation waits for its slowest,
    descheduled thread, and an answer took many times as long as on one thread
    (benchmarks/perf/first_answer.json: `two_threads`, the child as it was, against the rest)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m stiva_tui.runtime.model_process_main FD (started by Stiva)", file=sys.stderr)
        return 2
    with contextlib.suppress(OSError, AttributeError):
        os.nice(NICENESS)
    os.environ.setdefault("OMP_NUM_THREADS", str(cpu_threads()))  # before torch is imported; a user's own wins
    asyncio.run(serve(int(argv[0])))
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # a generation thread still running must not keep the process
