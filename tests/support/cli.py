"""The real `stiva` command, two ways.

- `run_stiva()`: in this process, through `stiva_tui.cli.main` (what the `stiva` console script's
  `entry` runs), with stdin, stdout and stderr of its own, the exit code, and the process left as it
  was found: the fast way, for what a command prints and exits with.
- `stiva()`: the venv's own `stiva` in a subprocess. Tests call it with `home=` (an isolated
  STIVA_HOME) where the process itself is the point: signals, `os._exit`, broken pipes, a terminal,
  file-size limits. Benchmarks call it with `what=`, which echoes the command, times it and exits
  the script with stiva's stderr on failure.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

STIVA = str(Path(sys.executable).parent / "stiva")
ROOT = Path(__file__).resolve().parents[2]  # the repository


def stiva(
    *args: str,
    home: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 120,
    fsize: int | None = None,
    prefix: tuple[str, ...] = (),
    pythonpath: bool = False,
    what: str | None = None,
) -> subprocess.CompletedProcess:
    """`stiva ARGS`, its output captured as text.

    - `home`: STIVA_HOME for this call; `env`: the environment to start from (default: this one's).
    - `fsize`: caps every file it writes at that many bytes (a full disk); `prefix`: words before it.
    - `pythonpath`: the repository root on PYTHONPATH, so that a `--pool` or plugin it names from
      `tests.support` or `benchmarks` imports.
    - `what`: a benchmark's step: print `$ stiva ...`, time it, and exit with its stderr if it fails.
    """
    environment = dict(os.environ if env is None else env)
    if home is not None:
        environment["STIVA_HOME"] = str(home)
    if pythonpath:
        environment["PYTHONPATH"] = str(ROOT)

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    if what is not None:
        print(f"$ stiva {' '.join(args)}", flush=True)
    started = time.monotonic()
    done = subprocess.run(
        [*prefix, STIVA, *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
        preexec_fn=limit if fsize is not None else None,
    )
    if what is not None:
        print(f"  {what}: exit {done.returncode} in {time.monotonic() - started:.0f} s", flush=True)
        if done.returncode != 0:
            sys.exit(f"{what} failed:\n{done.stderr[-3000:]}")
    return done


@dataclass(frozen=True)
class Result:
    """What `run_stiva` gives back, read as a `subprocess.CompletedProcess` of `stiva()` is read."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def run_stiva(
    *args: str | bytes,
    home: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    stdin: str | bytes = b"",
    pythonpath: bool = False,
) -> Result:
    """`stiva ARGS` in this process, as `stiva()` would run it in a subprocess: its exit code, and its
    stdout and stderr decoded as `subprocess.run(text=True)` decodes them.

    - `home`: STIVA_HOME for this call; `env`: the whole environment for it (default: this one's);
      `cwd`: the folder it runs in; `stdin`: what it reads (default: nothing, not a terminal).
    - bytes in `args` reach it as the interpreter hands undecodable argv bytes over (surrogates).
    - `pythonpath` is accepted for `stiva()`'s callers: here the repository is importable already.
    - An exception that escapes is printed as the interpreter would (a traceback, exit code 1).

    Everything the command may change in the process is put back: os.environ, the working folder,
    sys.argv and the standard streams, the signal handlers and the wakeup fd, the event loop policy,
    the root logger, the warning filters, the keyring backend it chose; a model it loaded and a
    grader pool it started go as they would with the process. A thread it started and left running
    fails the call: in a process of its own it would have kept `stiva` from exiting.
    """
    import pytest

    from stiva_tui.cli.main import main

    del pythonpath
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run_stiva in a running event loop: the command runs its own (make the test sync)")
    argv = [os.fsdecode(arg) for arg in args]
    environment = dict(os.environ if env is None else env)
    if home is not None:
        environment["STIVA_HOME"] = str(home)
    raw_stdin = stdin.encode() if isinstance(stdin, str) else stdin
    streams = {name: _stream() for name in ("stdin", "stdout", "stderr")}
    streams["stdin"].buffer.write(raw_stdin)
    streams["stdin"].buffer.seek(0)
    before = _ProcessState.take()
    try:
        with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
            for name in set(os.environ) - set(environment):
                patch.delenv(name)
            for name, value in environment.items():
                patch.setenv(name, value)
            if cwd is not None:
                patch.chdir(cwd)
            patch.setattr(sys, "argv", ["stiva", *argv])
            for name, stream in streams.items():
                patch.setattr(sys, name, stream)
            _forget_backends()
            try:
                code = _exit_code(main(argv))
            except SystemExit as exc:  # argparse: --help, --version and usage errors
                code = _exit_code(exc.code)
            except BaseException:  # as the interpreter says an uncaught exception
                traceback.print_exc()
                code = 1
            for stream in streams.values():
                stream.flush()
    finally:
        left = before.restore()
        _forget_backends()
    result = Result(tuple(argv), code, _text(streams["stdout"]), _text(streams["stderr"]))
    assert not left, f"stiva {' '.join(argv)} left threads running: {left}\n{result.stderr[-2000:]}"
    return result


def _stream() -> io.TextIOWrapper:
    """A standard stream as a pipe gives it: UTF-8 text over bytes (`.buffer`), not a terminal."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="\n", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    """The stream's bytes as `subprocess.run(text=True)` reads them: decoded, universal newlines."""
    data = stream.buffer.getvalue().decode("utf-8", "replace")  # type: ignore[attr-defined]
    return data.replace("\r\n", "\n").replace("\r", "\n")


def _exit_code(code: object) -> int:
    """The process exit code `sys.exit(code)` gives."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _forget_backends() -> None:
    """The keyring backend is chosen from the environment once per process: choose it again."""
    from stiva_tui import keys

    keys.reset_backend()


@dataclass
class _ProcessState:
    """What a command may change in the process beyond the environment and the streams."""

    handlers: dict[signal.Signals, object]
    wakeup_fd: int
    policy: object
    root_level: int
    root_handlers: list[logging.Handler]
    threads: set[threading.Thread]
    models: set[object]
    graders: object

    @classmethod
    def take(cls) -> _ProcessState:
        wakeup_fd = signal.set_wakeup_fd(-1)
        signal.set_wakeup_fd(wakeup_fd)
        return cls(
            handlers={sig: signal.getsignal(sig) for sig in _SIGNALS},
            wakeup_fd=wakeup_fd,
            policy=asyncio.events._event_loop_policy,  # noqa: SLF001 - None until someone asks for one
            root_level=logging.root.level,
            root_handlers=list(logging.root.handlers),
            threads=set(threading.enumerate()),
            models=set(_loaded_models()),
            graders=_grader_pool(),
        )

    def restore(self) -> list[str]:
        """Put it back; the threads started since that are still running after a grace period."""
        for sig, handler in self.handlers.items():
            if signal.getsignal(sig) is not handler and handler is not None:
                signal.signal(sig, handler)
        signal.set_wakeup_fd(self.wakeup_fd)
        asyncio.events._event_loop_policy = self.policy  # noqa: SLF001
        logging.root.setLevel(self.root_level)
        logging.root.handlers[:] = self.root_handlers
        if _grader_pool() not in (None, self.graders):  # a subprocess's pool would have ended with it
            sys.modules["stiva_tui.evals.graders"].shutdown_graders(wait=True)
        loaded = _loaded_models()
        for spec in set(loaded) - self.models:
            del loaded[spec]  # a subprocess's model would go with it: none stays in memory across tests
        deadline = time.monotonic() + 5
        started = [t for t in threading.enumerate() if t not in self.threads and not t.daemon]
        for thread in started:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in started if t.is_alive()]


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGHUP, signal.SIGCHLD, signal.SIGXFSZ)


def _loaded_models() -> dict:
    """The models loaded in this process (inference/checkpoints.py's cache), if any."""
    checkpoints = sys.modules.get("stiva_tui.inference.checkpoints")
    return checkpoints._cache if checkpoints is not None else {}  # noqa: SLF001


def _grader_pool() -> object:
    """The math graders' process pool (evals/graders.py), if one was started."""
    graders = sys.modules.get("stiva_tui.evals.graders")
    return getattr(graders, "_pool", None)
