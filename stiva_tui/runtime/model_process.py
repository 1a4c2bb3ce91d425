"""The models Stiva loads itself, run in a process of their own (`model_process = true`: the app
and `stiva serve`).

The embedded Gemma-3 270M (as conductor and as pool worker) and a local GPU conductor load and
generate in a child process, `python -m stiva_tui.runtime.model_process_main FD`. The app's own
process then never imports torch: torch's import, the weights' load and the decode loop hold the
GIL for up to a second at a time, and in the app's process every key typed meanwhile waited for
them (in the server's, every other request); and the front end's process stays small.

The child runs the very objects an in-process runtime runs (EmbeddedConductor, LocalConductor,
EmbeddedWorker), so plans and answers are the same; here are their stand-ins, which send each call
over a socket pair and stream back what it says (load progress, plan text as it is written, answer
text, usage). Messages are core/wire.py's length-prefixed JSON (model_wire.py names them), read
back only as those messages: nobody else holds either end of the pair, and even so a frame that is
no such message runs nothing (the child answers it with a `refused` and reads on).

One child per runtime, started on first use (the app's first use is its conductor's load, as it
starts). It exits when the socket closes (the app quit, or died). Where the child dies (killed, out
of memory), what it was running fails with an error that says so and where its log is, and the next
call starts a new one. With `shared`, the warm `stiva ask` worker's models are used instead where
one is up (shared_models.py): the same messages, over its socket rather than a socket pair.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from ..conductor.base import Conductor, ConductorError, DeltaCallback, Plan, PlanRequest
from ..config import ConductorConfig
from ..core.wire import WireError, frame, read_frame
from ..inference.progress import Progress, report
from ..pool.types import ChatEvent, PoolModel, ProviderError, StepInput, WorkerPrompt
from .model_wire import (
    Call,
    Cancel,
    Chat,
    ConductorSpec,
    Delta,
    Done,
    Error,
    Event,
    Gone,
    Load,
    PlanCall,
    Preload,
    Refused,
    Replies,
    Reply,
)
from .model_wire import Progress as LoadProgress

Answer = Reply | Gone  # what a call yields: the child's replies, or that it went away

MAIN_MODULE = "stiva_tui.runtime.model_process_main"
LOG_NAME = "model-process.log"
LOG_KEEP_BYTES = 1 << 20  # a log larger than this is started afresh
QUIT_WAIT_S = 3.0  # how long a child that was told to leave may take before it is killed


def shared_process() -> "ModelProcess":
    """The front ends' model process: the warm `stiva ask` worker's models where one serves them
    (one copy per user), else a child of this process; started on first use."""
    from .. import paths

    return ModelProcess(paths.data_dir() / LOG_NAME, shared=True)


def supported() -> bool:
    """Whether this system can run the models in a process of their own (a Unix socket pair)."""
    return hasattr(socket, "AF_UNIX") and sys.platform != "win32"


class ModelProcessGone(Exception):
    """The model process exited while a call was running in it."""


class ModelProcess:
    """The child process, started on first use; `call` sends one request and yields its replies.
    `shared`: the warm worker's models are used instead where one serves them (shared_models.py)."""

    def __init__(self, log_path: Path | None = None, *, shared: bool = False):
        self.log_path = log_path
        self.shared = shared
        self.generation = 0  # how many children were started: a new one has loaded nothing yet
        self._proc: asyncio.subprocess.Process | None = None
        self._worker_pid: int | None = None  # the warm worker's, while connected to it
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._calls: dict[int, asyncio.Queue[Answer]] = {}
        self._ids = itertools.count(1)
        self._start_lock = asyncio.Lock()
        self._closed = False
        self._warming: asyncio.Task[None] | None = None
        self._early: tuple[asyncio.subprocess.Process, socket.socket] | None = None
        self._preloaded = 0  # the generation of a child started with --preload: it warms up by itself

    @property
    def alive(self) -> bool:
        if self._writer is None:
            return False
        return self._worker_pid is not None or (self._proc is not None and self._proc.returncode is None)

    @property
    def pid(self) -> int | None:
        if not self.alive:
            return None
        return self._worker_pid if self._worker_pid is not None else self._proc.pid if self._proc else None

    @property
    def on_worker(self) -> bool:
        """Whether the models run in the warm worker (shared with `stiva ask`), not a child."""
        return self.alive and self._worker_pid is not None

    def _log(self) -> Any:
        if self.log_path is None:
            return asyncio.subprocess.DEVNULL
        with contextlib.suppress(OSError):
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self.log_path.exists() or self.log_path.stat().st_size > LOG_KEEP_BYTES
            log = open(self.log_path, "w" if fresh else "a", encoding="utf-8")  # noqa: SIM115 - handed to the child
            log.write(f"--- model process started {time.strftime('%Y-%m-%d %H:%M:%S')} by pid {os.getpid()}\n")
            log.flush()
            return log
        return asyncio.subprocess.DEVNULL

    def adopt(self, proc: asyncio.subprocess.Process, parent: socket.socket) -> None:
        """Take a child already started by `start_early` (the app's, beside its first paint) as
        this process's, instead of starting one on first use."""
        self._early = (proc, parent)

    async def _ensure(self) -> None:
        async with self._start_lock:
            if self._closed:
                raise ModelProcessGone("the model process was closed")
            if self.alive:
                return
            if self._early is not None:
                (self._proc, parent), self._early = self._early, None
                self._worker_pid = None
                reader, self._writer = await asyncio.open_unix_connection(sock=parent)
                self.generation += 1
                self._preloaded = self.generation
                self._reader_task = asyncio.create_task(self._read_replies(reader, self._proc))
                return  # one that died meanwhile is said so by its first call; the next starts anew
            if self.shared:
                from . import shared_models

                connection = await shared_models.connect()
                if connection is not None:
                    reader, self._writer, self._worker_pid = connection
                    self._proc = None
                    self.generation += 1
                    self._reader_task = asyncio.create_task(self._read_replies(reader, None))
                    return
            self._worker_pid = None
            parent, child = socket.socketpair()
            log = self._log()
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    MAIN_MODULE,
                    str(child.fileno()),
                    pass_fds=(child.fileno(),),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                )
            except OSError as exc:
                parent.close()
                raise ModelProcessGone(f"cannot start the model process: {exc}") from exc
            finally:
                child.close()
                if not isinstance(log, int):
                    log.close()
            reader, self._writer = await asyncio.open_unix_connection(sock=parent)
            self.generation += 1
            self._reader_task = asyncio.create_task(self._read_replies(reader, self._proc))

    async def _read_replies(self, reader: asyncio.StreamReader, proc: asyncio.subprocess.Process | None) -> None:
        why = ""
        while True:
            try:
                reply = await read_frame(reader, Replies)
            except EOFError:
                break
            except WireError as exc:  # not the child this process started: it is stopped
                why = f"sent a frame Stiva does not read ({exc})"
                break
            if isinstance(reply, Refused):  # the two ends disagree: what waits hears why, not nothing
                why = f"could not read a call ({reply.message})"
                break
            queue = self._calls.get(reply.id)
            if queue is not None:
                queue.put_nowait(reply)
        if why and proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        # The child went away: every call still waiting hears why.
        code = None
        if proc is not None:
            with contextlib.suppress(TimeoutError, ProcessLookupError):
                code = await asyncio.wait_for(proc.wait(), QUIT_WAIT_S)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        where = f"; its log: {self.log_path}" if self.log_path is not None else ""
        if not why:
            why = (
                f"exited with code {code}" if code is not None and code >= 0 else f"was killed (signal {-(code or 0)})"
            )
        text = f"the model process {why}; the next question starts it again{where}"
        if proc is None:  # the warm worker's connection, not a child
            text = f"the warm worker that ran the models went away; the next question starts a model process{where}"
        gone = Gone(message=text)
        for queue in self._calls.values():
            queue.put_nowait(gone)

    async def _wait_gone(self) -> None:
        """Until the replies' reader has seen the child go (the next call then starts another)."""
        if self._reader_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(self._reader_task)

    def _send(self, message: Call | Cancel) -> None:
        if self._writer is None or self._writer.is_closing():
            raise ModelProcessGone("the model process is not running")
        self._writer.write(frame(message))

    async def call(self, message: Call) -> AsyncGenerator[Answer, None]:
        """Send `message`, yield every reply to it, the last one of kind done, error or gone.
        Leaving early (cancelled, or the caller stops reading) cancels it in the child. A child
        that died before the call heard anything from it (it went away between two calls, and its
        end of the socket was not seen closed yet) is started again, and the call sent again, once."""
        for attempt in (1, 2):
            await self._ensure()
            call_id = next(self._ids)
            queue: asyncio.Queue[Answer] = asyncio.Queue()
            self._calls[call_id] = queue
            finished, heard = False, False
            try:
                try:
                    with contextlib.suppress(ModelProcessGone):
                        self._send(message.model_copy(update={"id": call_id}))
                except WireError as exc:  # too large to send: said as the child's errors are
                    queue.put_nowait(Error(id=call_id, message=f"cannot send this call to the model process: {exc}"))
                while not finished:
                    reply = await queue.get()
                    finished = isinstance(reply, (Done, Error, Gone))
                    if isinstance(reply, Gone) and not heard and attempt == 1:
                        await self._wait_gone()
                        break
                    heard = True
                    yield reply
            finally:
                self._calls.pop(call_id, None)
                if not finished:
                    with contextlib.suppress(ModelProcessGone, OSError, RuntimeError):
                        self._send(Cancel(id=call_id))
            if heard:
                return

    def warm_up(self) -> None:
        """Have the embedded worker warm up in the child now (`model_process_main.Server.preload`:
        its model loaded and its few-shot examples computed), without waiting: the first question
        then waits on neither. A failure is left to that question's own call to say."""
        if self._closed or self.on_worker or (self._warming is not None and not self._warming.done()):
            return  # the warm worker's model answered its asks: it is warm
        if self._early is not None or (self.alive and self._preloaded == self.generation):
            return  # started with --preload: it warms up by itself

        async def warm() -> None:
            with contextlib.suppress(ModelProcessGone, OSError):
                async with contextlib.aclosing(self.call(Preload())) as replies:
                    async for _reply in replies:
                        pass

        self._warming = asyncio.create_task(warm(), name="stiva-model-warm-up")

    async def aclose(self) -> None:
        """Tell the child to leave (its socket closes) and wait for it; kill it if it lingers."""
        self._closed = True
        if self._warming is not None:
            self._warming.cancel()
        if self._early is not None:  # started early, never used: told to leave as any other
            (self._proc, parent), self._early = self._early, None
            parent.close()
        proc = self._proc
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if proc is not None and proc.returncode is None:
            try:
                await asyncio.wait_for(proc.wait(), QUIT_WAIT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._reader_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._reader_task, QUIT_WAIT_S)


def _failure(reply: Error | Gone) -> str:
    return reply.message or "the model process failed"


class HostedConductor:
    """A conductor loaded and run in the model process: `shadow` is the same conductor built here,
    unloaded, for what it says about itself before its model is loaded."""

    def __init__(self, process: ModelProcess, shadow: Conductor, config: ConductorConfig):
        self.process = process
        self._shadow = shadow
        self._spec = ConductorSpec(backend=shadow.backend, config=config)
        self.backend = shadow.backend
        self.model = shadow.model
        self.quantization = shadow.quantization
        self.adapter = shadow.adapter
        self.last_stats: dict[str, Any] = {}
        self._facts: dict[str, Any] | None = None
        self._generation = -1

    @property
    def loaded(self) -> bool:
        return self._facts is not None and self._generation == self.process.generation and self.process.alive

    def describe(self) -> dict[str, Any]:
        info = dict(self._facts) if self._facts is not None else self._shadow.describe()
        info["process"] = self.process.pid
        if self.process.on_worker:  # the model the warm `stiva ask` worker loaded, not a copy of this app's
            info["warm_worker"] = True
        return info

    async def _run(self, message: Load | PlanCall, on_reply: Any) -> Done:
        try:
            async with contextlib.aclosing(self.process.call(message)) as replies:
                async for reply in replies:
                    if isinstance(reply, (Error, Gone)):
                        raise ConductorError(f"{self.backend} conductor: {_failure(reply)}")
                    if isinstance(reply, Done):
                        self._facts, self._generation = reply.describe, self.process.generation
                        return reply
                    on_reply(reply)
        except ModelProcessGone as exc:
            raise ConductorError(f"{self.backend} conductor: {exc}") from exc
        raise ConductorError(f"{self.backend} conductor: the model process sent no answer")

    async def load(self, progress: Progress | None = None) -> None:
        if self.loaded:
            return

        def told(reply: Answer) -> None:
            if isinstance(reply, LoadProgress):
                report(progress, reply.fraction, reply.message)

        await self._run(Load(conductor=self._spec), told)

    async def plan(self, request: PlanRequest, on_delta: DeltaCallback | None = None) -> Plan:
        def told(reply: Answer) -> None:
            if isinstance(reply, Delta) and on_delta is not None:
                on_delta(reply.text)

        done = await self._run(PlanCall(conductor=self._spec, request=request), told)
        self.last_stats = dict(done.stats or {})
        if done.plan is None:
            raise ConductorError(f"{self.backend} conductor: the model process sent no plan")
        return done.plan


class HostedWorker:
    """The embedded pool worker, answering in the model process."""

    def __init__(self, process: ModelProcess):
        self.process = process

    def prepare(self, model: PoolModel, step: StepInput) -> WorkerPrompt:
        from ..pool.embedded import base_worker_prompt

        return base_worker_prompt(step)

    async def stream_chat(
        self,
        model: PoolModel,
        messages: Sequence[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
    ) -> AsyncIterator[ChatEvent]:
        message = Chat(
            messages=[dict(m) for m in messages],
            max_tokens=max_tokens,
            temperature=temperature,
            stop=list(stop or ()),
        )
        try:
            async with contextlib.aclosing(self.process.call(message)) as replies:
                async for reply in replies:
                    if isinstance(reply, Event):  # the worker's own TextDelta or UsageReport
                        yield reply.event
                    elif isinstance(reply, (Error, Gone)):
                        raise ProviderError(_failure(reply), provider="embedded")
        except ModelProcessGone as exc:
            raise ProviderError(str(exc), provider="embedded") from exc
