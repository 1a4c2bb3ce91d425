"""`stiva ask` answers warm: a worker process keeps the runtime (and the model it loaded) between asks.

The first `stiva ask` that can use it starts the worker, detached, and asks through it; later ones
find it listening on a Unix socket of this user's (mode 0600, in the data dir, or in a private
folder under /tmp where that path is too long for a socket) and get their answer without loading
anything. The socket speaks core/wire.py's JSON frames, read back only as the messages below: a
frame that is not one (a pickle, say) runs nothing, is answered with a `refused`, and the worker
serves on. The worker exits after `[ask] warm_idle_s` seconds with no ask (600; 0: no worker).

What goes over the socket is the ask itself (its question and options) and, back, what the ask
would have drawn on stderr (the status line, the live view's events, its notes) and what it prints
at the end: the worker runs the same code as an ask in-process (ask.answer), records the run in the
same history (source "cli"), and the asking process prints the same things (ask.present). ctrl+c
cancels the run in the worker, which keeps it as cancelled, as in-process.

Which asks use it: every ask whose conductor may be a model Stiva loads itself (backend auto,
embedded or local), with any option (--baseline, --preset, --continue, budgets); asks on a remote
conductor load no model and run in-process unless `[ask] warm_remote = true`. `--no-warm` (or
STIVA_NO_WARM=1) asks in-process. A worker started under another config, pool, conductor, key
file or version is told to leave and replaced; `--prefer` is not one of them: it goes with each
ask, as the question does. Where the worker cannot be started or reached, the
ask runs in-process, saying nothing; why is in the worker's log (`ask-worker.log` beside the socket).

The worker's model serves the app and `stiva serve` too (runtime/shared_models.py): one of their
connections that says hello with `{"t": "models"}` and a matching fingerprint is served as their
model process would be, and keeps the worker while it lasts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, JsonValue, TypeAdapter

from ..core import events
from ..core.wire import Message, WireError, frame, read_frame, tagged

PROTOCOL = 2  # 2: JSON frames (core/wire.py); 1 spoke pickles
# A worker of another protocol cannot read this one's hello (nor say it is of another config), so
# each protocol has a socket of its own: a worker left from before waits out its idle time alone.
START_TIMEOUT_S = 120.0  # the longest wait for a worker just started to listen
EXIT_LOCKED = 3  # a worker exits with this where another one holds the socket's lock
ENV_MATTERS = ("KEY", "TOKEN", "SECRET", "STIVA", "HF_", "XDG_", "CUDA", "PYTHON", "OLLAMA", "PROXY", "HOME")


# --- which asks, and where ---------------------------------------------------------------------


def wanted(args: Any, config: Any) -> bool:
    """Whether this ask goes to the warm worker (else it runs in this process)."""
    from ..config import ConfigError, with_conductor_override

    if getattr(args, "no_warm", False) or os.environ.get("STIVA_NO_WARM", "") not in ("", "0"):
        return False
    if config.ask.warm_idle_s <= 0 or not hasattr(socket, "AF_UNIX") or sys.platform == "win32":
        return False
    try:
        backend = with_conductor_override(config.conductor, args.conductor).backend
    except ConfigError:  # said by the in-process path, in its words
        return False
    return backend != "remote" or config.ask.warm_remote


def socket_path() -> Path:
    """Where the worker listens (paths.warm_socket_path): the app and `stiva serve` find it there too."""
    from .. import paths

    return paths.warm_socket_path(PROTOCOL)


def _private_folder(folder: Path) -> None:
    """The socket's folder: the data dir (Stiva's own, where the user may have linked it: made, and
    tightened, here), or the private folder under the temporary folder that paths.runtime_dir
    made or checked, looked at again without following a link, and never changed."""
    from .. import paths

    if folder == paths.data_dir():
        paths.private_dir(folder, tighten=True)
        info = folder.stat()
        private = info.st_uid == os.geteuid() and not info.st_mode & 0o077
    else:
        private = paths.own_private_folder(folder, make=False)
    if not private:
        raise OSError(f"{folder} is not a private folder of this user's")


def base_config(options: dict) -> Any:
    """The config as `stiva` makes it from the command line, before a simulated pool is started."""
    from ..config import load_config

    config = load_config(options.get("config"))
    if options.get("pool"):
        from ..sim.pool import pool_config

        config = pool_config(config, options["pool"])
    # `--prefer` is not here: a preference is per question, sent with each ask (ask.options_of), so
    # a worker answers every preference without starting again
    return config


def fingerprint(options: dict) -> str:
    """What a worker must have been started with to answer this ask as this process would."""
    from .. import __version__
    from ..keys import keys_file

    config = base_config(options)
    try:
        info = keys_file().stat()
        keys = [info.st_mtime_ns, info.st_size]
    except OSError:
        keys = []
    env = sorted((k, v) for k, v in os.environ.items() if any(word in k.upper() for word in ENV_MATTERS))
    parts = [
        PROTOCOL,
        __version__,
        sys.executable,
        str(Path(__file__).resolve().parent),
        config.model_dump_json(),
        options.get("conductor"),
        env,
        keys,
    ]
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _command_options(args: Any) -> dict:
    config = getattr(args, "config", None)
    return {
        "config": str(Path(config).expanduser().resolve()) if config else None,
        "pool": getattr(args, "pool", None),
        "conductor": getattr(args, "conductor", None),
    }


# --- the wire: core/wire.py's JSON frames, read back only as these messages ----------------------

Scalar = str | int | float | bool | None  # an ask's options (ask.options_of): plain values only
Plain = dict[str, JsonValue]  # what ask.answer returns for ask.present, and a say's keywords
# every event of core/events.py, and nothing else: a "type" naming another class is refused
EVENT_TYPES = tuple(
    cls
    for cls in vars(events).values()
    if isinstance(cls, type) and issubclass(cls, events.Event) and cls is not events.Event
)
TaggedEvent = tagged(*EVENT_TYPES)


class Hello(Message):  # the first message of an ask: "are you a worker of my config?"
    t: Literal["hello"] = "hello"
    fingerprint: str


class StatusQuery(Message):  # `worker_status`: the worker's pid and how many asks it answered
    t: Literal["status"] = "status"


class AskRequest(Message):  # after "ok": the ask itself
    t: Literal["ask"] = "ask"
    question: str
    options: dict[str, Scalar]
    live: bool


class Cancel(Message):  # ctrl+c while the worker runs the ask
    t: Literal["cancel"] = "cancel"


class ModelsHello(Message):  # the app's or `stiva serve`'s model process: "may I use your models?"
    t: Literal["models"] = "models"
    fingerprint: str  # runtime/shared_models.py's: the same Stiva, Python and model cache


class WorkerState(Message):
    t: Literal["state"] = "state"
    pid: int
    served: int
    active: int
    fronts: int = 0  # front ends (the app, `stiva serve`) using this worker's models now


class Ok(Message):  # a worker of the hello's config: the ask may come
    t: Literal["ok"] = "ok"
    pid: int


class Other(Message):  # a worker of another config, now leaving
    t: Literal["other"] = "other"


class Say(Message):  # the ConsoleUI calls of the ask the worker runs
    t: Literal["say"] = "say"
    markup: str
    kwargs: Plain


class Status(Message):
    t: Literal["status"] = "status"
    text: str | None


class View(Message):
    t: Literal["view"] = "view"
    on: bool


class RunEvent(Message):  # one of the run's events, for the live view
    t: Literal["event"] = "event"
    event: TaggedEvent


class Done(Message):  # the ask's end, as ask.answer returns it
    t: Literal["done"] = "done"
    done: Plain


class Fail(Message):
    t: Literal["fail"] = "fail"
    message: str
    code: int


class Cancelled(Message):  # the run was cancelled (and kept as such, unless `trouble` says why not)
    t: Literal["cancelled"] = "cancelled"
    trouble: str | None


class Refused(Message):  # a frame the other end could not read: nothing of it ran
    t: Literal["refused"] = "refused"
    message: str


ToWorkerMessage = Hello | StatusQuery | AskRequest | Cancel | ModelsHello
FromWorkerMessage = WorkerState | Ok | Other | Say | Status | View | RunEvent | Done | Fail | Cancelled | Refused
ToWorker = TypeAdapter(Annotated[ToWorkerMessage, Field(discriminator="t")])
FromWorker = TypeAdapter(Annotated[FromWorkerMessage, Field(discriminator="t")])


async def _read(reader: asyncio.StreamReader, messages: TypeAdapter = FromWorker) -> Any:
    """The next message; EOFError where the other end went away, WireError for a frame that is none."""
    return await read_frame(reader, messages)


# --- the asking side ---------------------------------------------------------------------------


async def ask(args: Any, question: str, stopped_by: list[int], *, ask_options: dict, console_ui, present) -> int | None:
    """Ask through the warm worker (starting it where none listens): the exit code, or None where
    the worker cannot be used (the ask then runs in this process). `console_ui` and `present` are
    ask.py's: the progress is drawn, and the end printed, as in-process."""
    from rich.console import Console

    options = _command_options(args)
    try:
        wanted_fp = fingerprint(options)
        path = socket_path()
        _private_folder(path.parent)
    except Exception:  # noqa: BLE001 - a config the in-process path says is wrong, a folder it cannot make
        return None
    console = Console(stderr=True)
    connection = await _connect(path, wanted_fp, options, console, quiet=bool(args.json))
    if connection is None:
        return None
    reader, writer = connection
    ui = console_ui(console, question, live=not args.json and console.is_terminal)
    started = False
    try:
        try:
            request = frame(AskRequest(question=question, options=ask_options, live=ui.live))
        except (WireError, ValueError):  # an ask it cannot send (over a frame's limit): in this process
            ui.close()
            return None
        writer.write(request)
        await writer.drain()
        while True:
            message = await _read(reader)
            if isinstance(message, Refused):
                raise WireError(f"the worker refused the ask: {message.message}")
            started = True
            if isinstance(message, Say):
                ui.say(message.markup, **message.kwargs)
            elif isinstance(message, Status):
                ui.status(message.text)
            elif isinstance(message, View):
                ui.view(message.on)
            elif isinstance(message, RunEvent):
                if ui.emit is not None:
                    ui.emit(message.event)
            elif isinstance(message, Done):
                ui.close()
                return present(message.done, console, json_trace=bool(args.json))
            elif isinstance(message, Fail):
                ui.close()
                from .common import fail

                return fail(message.message, message.code)
    except (EOFError, WireError) as exc:
        ui.close()
        if not started:  # the worker went (or could not read the ask) before it took it: ask in this process
            return None
        from .common import EXIT_FAILED, fail

        why = (
            "stopped before the answer" if isinstance(exc, EOFError) else f"sent what this stiva does not read ({exc})"
        )
        return fail(f"the warm worker {why}: ask again, or with --no-warm", EXIT_FAILED)
    except asyncio.CancelledError:
        ui.close()
        return await _cancel(reader, writer, stopped_by)
    finally:
        writer.close()


async def _cancel(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stopped_by: list[int]) -> int:
    """ctrl+c or SIGTERM: the worker cancels the run (kept as cancelled) and says whether the
    history has it; then the same lines as in-process."""
    from .common import EXIT_CANCELLED, EXIT_TERMINATED, fail

    trouble = None
    with contextlib.suppress(Exception):
        writer.write(frame(Cancel()))
        await writer.drain()
        deadline = time.monotonic() + 10
        while (left := deadline - time.monotonic()) > 0:
            message = await asyncio.wait_for(_read(reader), left)
            if isinstance(message, Cancelled):
                trouble = message.trouble
            if isinstance(message, (Cancelled, Done, Fail)):
                break
    code = stopped_by[0] if stopped_by else EXIT_CANCELLED
    if trouble is not None:
        fail(trouble)
    return fail("terminated" if code == EXIT_TERMINATED else "cancelled", code)


async def _hello(path: Path, wanted_fp: str) -> tuple[str, Any]:
    """("ok", (reader, writer)), ("other", None): a worker of another config, now leaving, or
    ("none", None): nobody listens (a stale socket file is removed)."""
    try:
        reader, writer = await asyncio.open_unix_connection(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        with contextlib.suppress(OSError):
            if path.is_socket() and not _listening(path):
                path.unlink()  # a worker that died without cleaning up
        return "none", None
    except OSError:
        return "none", None
    try:
        writer.write(frame(Hello(fingerprint=wanted_fp)))
        await writer.drain()
        reply = await asyncio.wait_for(_read(reader), 10)
    except (EOFError, OSError, TimeoutError, WireError):
        writer.close()
        return "none", None
    if isinstance(reply, Ok):
        return "ok", (reader, writer)
    writer.close()
    return ("other" if isinstance(reply, Other) else "none"), None


def _listening(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


async def _connect(path: Path, wanted_fp: str, options: dict, console: Any, *, quiet: bool):
    state, connection = await _hello(path, wanted_fp)
    if state == "ok":
        return connection
    try:
        process = start_worker(path, wanted_fp, options)
    except OSError:
        return None
    status = None if quiet else console.status("starting the warm worker (it keeps the model loaded between asks)…")
    if status is not None:
        status.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            code = process.poll()
            if code is not None and code != EXIT_LOCKED:
                return None  # it could not start: its log says why
            state, connection = await _hello(path, wanted_fp)
            if state == "ok":
                return connection
            if state == "other" and code == EXIT_LOCKED:
                return None  # another config's worker holds the place: not worth a fight
        return None
    finally:
        if status is not None:
            status.stop()


def start_worker(path: Path, wanted_fp: str, options: dict) -> subprocess.Popen:
    """Start the worker, detached (its own session, no terminal), its output to its log."""
    argv = [sys.executable, "-m", "stiva_tui.cli.warm_worker", "--socket", str(path), "--fingerprint", wanted_fp]
    for name in ("config", "pool", "conductor"):
        if options.get(name) is not None:
            argv += [f"--{name}", str(options[name])]
    log = path.with_name(path.name.removesuffix(".sock") + ".log")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(log, flags, 0o600)
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            close_fds=True,
            env={**os.environ, "STIVA_WARM_WORKER": "1"},
        )
    finally:
        os.close(fd)


async def worker_status(path: Path | None = None) -> dict | None:
    """The listening worker's pid and how many asks it answered (None: no worker)."""
    path = path or socket_path()
    try:
        reader, writer = await asyncio.open_unix_connection(str(path))
    except OSError:
        return None
    try:
        writer.write(frame(StatusQuery()))
        await writer.drain()
        reply = await asyncio.wait_for(_read(reader), 10)
        return reply.model_dump() if isinstance(reply, WorkerState) else None
    except (EOFError, OSError, TimeoutError, WireError):
        return None
    finally:
        writer.close()


# --- the worker ----------------------------------------------------------------------------------


class _RemoteUI:
    """ask.ConsoleUI's calls, sent to the asking process."""

    def __init__(self, send, question: str, live: bool):
        self._send = send
        self.question = question
        self.live = live
        self._on = False

    def say(self, markup: str, **kwargs: Any) -> None:
        self._send(Say(markup=markup, kwargs=kwargs))

    def status(self, text: str | None) -> None:
        self._send(Status(text=text))

    def view(self, on: bool) -> None:
        if self.live and on != self._on:
            self._on = on
            self._send(View(on=on))

    @property
    def emit(self):
        return self._event if self._on else None

    def _event(self, event: Any) -> None:
        self._send(RunEvent(event=event))

    def close(self) -> None:
        self.view(False)


class Worker:
    def __init__(self, path: Path, wanted_fp: str, config: Any, conductor: str | None, answer, history_trouble):
        self.answer = answer  # ask.answer and ask._history_trouble (warm_worker.py hands them over)
        self.history_trouble = history_trouble
        self.path = path
        self.fingerprint = wanted_fp
        self.config = config
        self.conductor = conductor
        self.idle_s = config.ask.warm_idle_s
        self.active = 0
        self.served = 0
        self.fronts = 0  # front ends (the app, `stiva serve`) using this process's models now
        self.last = time.monotonic()
        self.retired = False  # another config's ask came: the socket is given up, leave when idle
        self.stopping: asyncio.Event | None = None
        self.runtime_task: asyncio.Task | None = None
        self.inode: int | None = None
        self.lock_fd: int | None = None

    async def serve(self) -> int:
        from ..runtime import Runtime
        from .common import set_on_signals

        self.stopping = asyncio.Event()
        set_on_signals(self.stopping)
        self.runtime_task = asyncio.create_task(Runtime.create(self.config, conductor=self.conductor))
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # the lock is ours: whatever is there is stale
        old = os.umask(0o177)
        try:
            server = await asyncio.start_unix_server(self._client, str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self.inode = self.path.stat().st_ino
        print(f"stiva ask worker {os.getpid()}: listening on {self.path}", flush=True)
        try:
            while not self.stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), min(1.0, max(self.idle_s / 4, 0.05)))
                if self.active:
                    continue
                if self.retired or time.monotonic() - self.last > self.idle_s or not self._still_ours():
                    break
        finally:
            server.close()
            self._give_up_socket()
            runtime = await self._runtime_or_none()
            if runtime is not None:
                await runtime.aclose()
        print(f"stiva ask worker {os.getpid()}: leaving after {self.served} ask(s)", flush=True)
        return 0

    def _still_ours(self) -> bool:
        try:
            return self.path.stat().st_ino == self.inode
        except OSError:
            return False

    def _give_up_socket(self) -> None:
        if self._still_ours():
            with contextlib.suppress(OSError):
                self.path.unlink()
        if self.lock_fd is not None:
            os.close(self.lock_fd)  # a new worker may take the place now
            self.lock_fd = None

    async def _runtime_or_none(self):
        if self.runtime_task is None:
            return None
        if not self.runtime_task.done():
            self.runtime_task.cancel()
        try:
            return await self.runtime_task
        except BaseException:  # noqa: BLE001 - it failed to start, and said so to the ask that came
            return None

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.active += 1
        try:
            if not _same_user(writer):
                return
            message = await asyncio.wait_for(_read(reader, ToWorker), 30)
            if isinstance(message, StatusQuery):
                state = WorkerState(pid=os.getpid(), served=self.served, active=self.active, fronts=self.fronts)
                writer.write(frame(state))
            elif isinstance(message, ModelsHello):
                await self._models(message, reader, writer)
            elif isinstance(message, Hello):
                if message.fingerprint != self.fingerprint or self.retired:
                    self.retired = True
                    self._give_up_socket()
                    writer.write(frame(Other()))
                else:
                    writer.write(frame(Ok(pid=os.getpid())))
                    await writer.drain()
                    request = await _read(reader, ToWorker)
                    if isinstance(request, AskRequest):
                        await self._ask(request, reader, writer)
            await writer.drain()
        except WireError as exc:  # nothing of it ran; this asker is done with, the others are served on
            print(f"stiva ask worker {os.getpid()}: refused a frame: {exc}", flush=True)
            with contextlib.suppress(Exception):
                writer.write(frame(Refused(message=str(exc))))
                await writer.drain()
        except (EOFError, OSError, TimeoutError):
            pass
        finally:
            self.active -= 1
            self.last = time.monotonic()
            writer.close()

    async def _models(self, hello: ModelsHello, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve a front end's model process on this process's models (runtime/shared_models.py)
        while it stays connected; one of another Stiva, Python or model cache is told "other"."""
        from ..runtime import shared_models
        from ..runtime.model_process_main import serve_stream

        if hello.fingerprint != shared_models.fingerprint():
            writer.write(frame(Other()))
            return
        writer.write(frame(Ok(pid=os.getpid())))
        await writer.drain()
        self.fronts += 1
        try:
            await serve_stream(reader, writer)
        finally:
            self.fronts -= 1

    async def _ask(self, request: AskRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from ..conductor.base import ConductorError
        from ..runtime import AskError, StartupError
        from ..store import HistoryFault, StoreError
        from ..store.faults import HistoryFaultsHeldBack
        from .common import EXIT_FAILED, EXIT_USAGE

        loop = asyncio.get_running_loop()
        thread = threading.get_ident()

        def send(message: Message) -> None:
            if writer.is_closing():
                return
            if threading.get_ident() == thread:
                try:
                    writer.write(frame(message))
                except WireError as exc:  # over a frame's limit: the asker hears why, not nothing
                    writer.write(
                        frame(Fail(message=f"the warm worker cannot send the answer: {exc}", code=EXIT_FAILED))
                    )
            else:  # a model's loading progress comes from its thread
                loop.call_soon_threadsafe(send, message)

        try:
            runtime = await asyncio.shield(self.runtime_task)
        except (StoreError, StartupError) as exc:
            code = EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE
            send(Fail(message=str(exc), code=code))
            self.retired = True  # nothing more to serve: the next ask starts afresh
            return
        ui = _RemoteUI(send, request.question, request.live)
        held_back = HistoryFaultsHeldBack(every_error=True)
        run = asyncio.create_task(self.answer(dict(request.options), runtime, request.question, held_back, ui))
        listen = asyncio.create_task(_read(reader, ToWorker))  # a "cancel", or the asker gone (ctrl+c twice)
        try:
            await asyncio.wait({run, listen}, return_when=asyncio.FIRST_COMPLETED)
            if not run.done():
                run.cancel()
            try:
                done = await run
            except asyncio.CancelledError:
                send(Cancelled(trouble=self.history_trouble(runtime, held_back)))
            except AskError as exc:
                send(Fail(message=str(exc), code=EXIT_USAGE))
            except (ConductorError, StartupError, StoreError) as exc:
                send(Fail(message=str(exc), code=EXIT_FAILED))
            else:
                self.served += 1
                send(Done(done=done))
        finally:
            listen.cancel()
            ui.close()
            held_back.close()


def _same_user(writer: asyncio.StreamWriter) -> bool:
    """Whether the peer runs as this user (the socket's mode says so already; Linux tells it too)."""
    sock = writer.get_extra_info("socket")
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return True
    _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid == os.geteuid()


def main(answer, history_trouble, argv: list[str] | None = None) -> int:
    """`python -m stiva_tui.cli.warm_worker --socket PATH --fingerprint FP [--config ...]`: the worker."""
    import argparse
    import fcntl

    parser = argparse.ArgumentParser(prog="stiva-ask-worker")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--fingerprint", required=True)
    for name in ("config", "pool", "conductor"):
        parser.add_argument(f"--{name}")
    args = parser.parse_args(argv)
    path = Path(args.socket)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    lock_fd = os.open(f"{path}.lock", flags, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock_fd)
        print("another worker holds this socket", flush=True)
        return EXIT_LOCKED
    from ..runtime.model_process_main import cpu_threads

    # The model it holds answers the app and `stiva serve` too (runtime/shared_models.py): torch on
    # as many threads as the model process uses, one fewer than the cores (before torch's import)
    os.environ.setdefault("OMP_NUM_THREADS", str(cpu_threads()))
    options = {name: getattr(args, name) for name in ("config", "pool", "conductor")}
    config = base_config(options)
    server = None
    if config.sim is not None:
        from ..bench.replay import start_pool

        config, server = start_pool(config)
    worker = Worker(path, args.fingerprint, config, args.conductor, answer, history_trouble)
    worker.lock_fd = lock_fd
    try:
        return asyncio.run(worker.serve())
    finally:
        if server is not None:
            server.stop()
