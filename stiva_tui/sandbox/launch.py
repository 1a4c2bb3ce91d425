"""Launching one sandboxed run and collecting it: the one launcher (`_start`) and the one collector
(`_finish`) behind every kind of run (`runner`), and the probe a candidate isolation is tried with
(`detect`). Only Stiva decides a pass: nothing here reads a verdict from what the code prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from . import _child
from .cgroups import RunCgroup
from .isolation import Isolation, bwrap_argv, interpreter, sandbox_env, sandbox_exec_profile
from .seccomp import seccomp_program
from .settings import SandboxSettings

__all__ = ["SandboxResult", "probe_run", "remove_tree", "run_sync", "run_uid"]


_STATUS_LIMIT = 64 * 1024
_GRACE_S = 1.0  # after the run ends, the longest wait for its pipes to close


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """What a sandboxed run did. `ok`: the code exited with status 0, in time, within its limits.

    `returncode` is the code's exit status (negative for a signal: -9 killed, -24 SIGXCPU, -25
    SIGXFSZ), or None when it never ran (the sandbox could not start; `stderr` says why).
    `limit` names the whole-run limit that ended it ("memory: more than 512 MB in all").
    `isolation` is how it ran: "bwrap", "sandbox-exec" or "none" (the unsafe opt-in).
    """

    ok: bool
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool = False
    limit: str | None = None
    isolation: str = "bwrap"
    messages: tuple[Any, ...] = field(default=(), repr=False)  # from the result pipe, decoded JSON


def run_sync(coroutine):
    """Run `coroutine` to completion from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    box: dict[str, Any] = {}

    def target():
        try:
            box["value"] = asyncio.run(coroutine)
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="stiva-sandbox")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def probe_run(iso: Isolation, settings: SandboxSettings) -> str | None:
    """None when a trivial script runs under `iso`; else why not, in one clause."""

    async def probe():
        started = await _start(
            iso,
            settings,
            "script",
            {"solution.py": "import os\nprint('stiva-sandbox-ok', *os.getresuid())"},
            timeout_s=30.0,
            output_limit=4096,
        )
        return await _finish(started, 30.0)

    try:
        result = run_sync(probe())
    except OSError as exc:
        return f"could not start ({exc.strerror or exc})"
    said = result.stdout.split()
    if result.ok and said[:1] == ["stiva-sandbox-ok"]:
        if iso.drop_root and (len(said) != 4 or "0" in said[1:]):
            return "the code would run as root"
        return None
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    return (lines[-1] if lines else _why(result) or "no output")[:300]


# --- launching -----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Started:
    proc: asyncio.subprocess.Process
    iso: Isolation
    readers: dict[str, asyncio.Task]
    workdir: str | None
    cgroup: RunCgroup | None = None
    memory_mb: int = 0

    async def kill(self) -> None:
        # The group, never `proc.kill()`: Popen.send_signal polls first and may reap the child
        # under asyncio's watcher, which then reports it as unknown.
        _kill_group(self.proc.pid)
        # asyncio's wait() also waits for the pipes to close, which an unisolated survivor may hold
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), 2 * _GRACE_S)


async def _start(
    iso: Isolation,
    settings: SandboxSettings,
    mode: str,
    files: dict[str, str],
    *,
    timeout_s: float,
    output_limit: int,
    stdin: bytes | None = None,
    fds: dict[str, int] | None = None,
    extra: dict[str, Any] | None = None,
    reads: dict[str, int] | None = None,
) -> _Started:
    """Start one sandboxed run. `fds` are pipe ends the run's harness uses (passed through, closed
    by the caller); `reads` are the parent's ends to collect, owned from here on."""
    fds, reads = fds or {}, reads or {}
    interp = interpreter(settings)
    status_r, status_w = os.pipe()
    own = [status_w]
    workdir = None
    cgroup = None
    limits = {
        "memory_mb": settings.memory_mb,
        "processes": settings.processes,
        "disk_mb": settings.disk_mb,
        "files": settings.files,
        "cpu_s": max(1, int(timeout_s) + 1),
    }
    config: dict[str, Any] = {
        "mode": mode,
        "limits": limits,
        "status_fd": status_w,
        "paths": list(interp.paths),
        **fds,
        **(extra or {}),
    }
    child_source = _child_source()
    try:
        executable = None
        if iso.kind == "bwrap":
            config.update(watch=True, tmp="/tmp", landlock=True, **{_key(name): f"/sandbox/{name}" for name in files})
            if iso.drop_root:
                config["drop"] = run_uid()
            blobs = {
                "/sandbox/child.py": child_source,
                "/sandbox/config.json": json.dumps(config),
                **{f"/sandbox/{name}": text for name, text in files.items()},
            }
            data = {inside: _memfd(text.encode("utf-8")) for inside, text in blobs.items()}
            own += data.values()
            program = seccomp_program() if iso.seccomp else None
            seccomp_fd = _memfd(program) if program else None
            if seccomp_fd is not None:
                own.append(seccomp_fd)
            full = bwrap_argv(
                iso,
                settings,
                interp,
                data=data,
                seccomp_fd=seccomp_fd,
                child_args=["/sandbox/child.py", "/sandbox/config.json"],
            )
            # bwrap reads its options from a memfd, and its argv[0] is a bare name: what the code
            # reads in /proc/1/cmdline names no host path but the interpreter's, bound inside.
            split = full.index("--")
            args_fd = _memfd(b"".join(arg.encode("utf-8") + b"\0" for arg in full[1:split]))
            own.append(args_fd)
            executable, argv = full[0], ["bwrap", "--args", str(args_fd), *full[split:]]
            env, cwd = {"PATH": "/usr/bin:/bin"}, "/"
        else:
            workdir = tempfile.mkdtemp(prefix="stiva-sandbox-")
            config.update(watch=False, tmp=workdir, **{_key(name): os.path.join(workdir, name) for name in files})
            for name, text in {**files, "child.py": child_source, "config.json": json.dumps(config)}.items():
                with open(os.path.join(workdir, name), "w", encoding="utf-8") as handle:
                    handle.write(text)
            argv = [
                interp.executable,
                "-I",
                "-S",
                "-B",
                "-X",
                "utf8",
                os.path.join(workdir, "child.py"),
                os.path.join(workdir, "config.json"),
            ]
            if iso.kind == "sandbox-exec":
                argv = [iso.path or "sandbox-exec", "-p", sandbox_exec_profile(interp, workdir), *argv]
            env, cwd = sandbox_env(workdir), workdir
        # The cgroup's memory counts the run's /tmp too (tmpfs pages), and bwrap's own processes.
        cgroup = RunCgroup.create(settings.processes + 4, (settings.memory_mb + settings.disk_mb + 32) * 2**20)
        if cgroup is not None:
            argv = cgroup.wrap(argv, executable=executable or argv[0], python=interp.executable)
            executable = None
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=[*own, *fds.values()],
            start_new_session=True,
            env=env,
            cwd=cwd,
            executable=executable,
        )
    except BaseException:
        _close(status_r)
        for fd in reads.values():
            _close(fd)
        if workdir:
            remove_tree(workdir)
        if cgroup is not None:
            cgroup.close()
        raise
    finally:
        for fd in own:
            _close(fd)
    # Read from the first byte: a pipe nobody reads blocks the code, and asyncio's wait() for the
    # process then waits for that pipe too.
    assert proc.stdout is not None and proc.stderr is not None
    readers = {
        "stdout": asyncio.ensure_future(_drain(proc.stdout, output_limit)),
        "stderr": asyncio.ensure_future(_drain(proc.stderr, output_limit)),
        "status": asyncio.ensure_future(_read_fd(status_r, _STATUS_LIMIT)),
        **{name: asyncio.ensure_future(_read_fd(fd, _child.MESSAGE_LIMIT * 2)) for name, fd in reads.items()},
    }
    if stdin is not None:
        readers["stdin"] = asyncio.ensure_future(_feed(proc, stdin))
    return _Started(proc, iso, readers, workdir, cgroup, settings.memory_mb)


# Runs of a root Stiva get a uid of their own, unused by any account (above what distributions
# allocate, below the overflow uid's range of 2^32): never root, and no two runs share
# RLIMIT_NPROC's count.
_RUN_UIDS = (0x6000_0000, 0x7000_0000)


def run_uid() -> list[int]:
    """[uid, gid] for one run of a root Stiva."""
    import secrets

    uid = secrets.randbelow(_RUN_UIDS[1] - _RUN_UIDS[0]) + _RUN_UIDS[0]
    return [uid, uid]


@functools.lru_cache(maxsize=1)
def _child_source() -> str:
    """The text of `_child.py`, read once: every run gets a copy of it."""
    return resources.files(_child.__package__).joinpath("_child.py").read_text(encoding="utf-8")


def _key(name: str) -> str:
    return {"solution.py": "solution", "tests.py": "tests", "arguments.json": "arguments"}[name]


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("stiva-sandbox", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            proc.stdin.close()


async def _read_fd(fd: int, limit: int) -> tuple[bytes, bool]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        return await _drain(reader, limit)
    finally:
        transport.close()


async def _drain(reader: asyncio.StreamReader, limit: int) -> tuple[bytes, bool]:
    """Everything `reader` gives until EOF; the first `limit` bytes kept, the rest dropped."""
    kept = bytearray()
    cut = False
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return bytes(kept), cut
        room = limit - len(kept)
        if room > 0:
            kept += chunk[:room]
        cut = cut or len(chunk) > max(room, 0)


# --- collecting ----------------------------------------------------------------------------------


async def _finish(started: _Started, timeout_s: float, *, ended: bool = False) -> SandboxResult:
    """Wait for the run (at most `timeout_s`), end whatever is left of it, and read what it left."""
    proc = started.proc
    tasks = list(started.readers.values())
    timed_out = memory_hit = False
    try:
        if not ended:
            try:
                await asyncio.wait_for(proc.wait(), timeout=timeout_s)
            except TimeoutError:
                timed_out = True
        await started.kill()
        memory_hit = started.cgroup is not None and started.cgroup.hit_memory_limit()
        # bwrap's pipes close when its pid namespace is gone; an unisolated survivor may hold them
        done, pending = await asyncio.wait(tasks, timeout=_GRACE_S)
        for task in pending:
            task.cancel()
    except BaseException:
        for task in tasks:
            task.cancel()
        await started.kill()
        raise
    finally:
        if started.workdir:
            await asyncio.to_thread(remove_tree, started.workdir)
        if started.cgroup is not None:
            await asyncio.to_thread(started.cgroup.close)
    stdout, cut_out = _value(started.readers["stdout"], (b"", False))
    stderr, cut_err = _value(started.readers["stderr"], (b"", False))
    status_raw, _ = _value(started.readers["status"], (b"", False))
    status = _last_message(status_raw)
    messages = ()
    if "result" in started.readers:
        raw, _ = _value(started.readers["result"], (b"", False))
        messages = tuple(_messages(raw))
    limit = status.get("limit") if isinstance(status, dict) else None
    code = status.get("exit") if isinstance(status, dict) and isinstance(status.get("exit"), int) else None
    if limit is None and memory_hit and not (code == 0 and not timed_out):
        limit = f"memory: more than {started.memory_mb} MB in all (the kernel's cgroup limit)"
    text_err = stderr.decode("utf-8", errors="replace")
    if code is None and not timed_out and not limit and not ended:
        # the supervisor never reported: the sandbox failed to start, or was broken from inside
        text_err = text_err or f"sandbox: ended with status {proc.returncode} before the code finished"
    ok = code == 0 and not timed_out and limit is None
    return SandboxResult(
        ok,
        code,
        stdout.decode("utf-8", errors="replace"),
        text_err,
        timed_out,
        cut_out or cut_err,
        limit,
        started.iso.kind,
        messages,
    )


def _value(task: asyncio.Task, default):
    if task.done() and not task.cancelled() and task.exception() is None:
        return task.result()
    return default


def _messages(raw: bytes) -> list[Any]:
    found = []
    for line in raw.splitlines():
        if len(line) > _child.MESSAGE_LIMIT:
            continue
        try:
            found.append(json.loads(line))
        except (ValueError, RecursionError):
            continue
    return found


def _last_message(raw: bytes) -> Any:
    messages = _messages(raw)
    return messages[-1] if messages else None


def _why(result: SandboxResult) -> str:
    if result.timed_out:
        return "timed out"
    if result.limit:
        return f"stopped at a sandbox limit: {result.limit}"
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    return "\n".join(lines[-4:])[-400:]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def remove_tree(top: str) -> None:
    """Delete a folder the untrusted code could fill: iteratively, one open folder at a time and
    relative to it (a 5,000-deep tree is fine, however long its paths), never following a symlink
    it planted. Errors are ignored: what cannot be removed stays."""
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(top, flags)
    except OSError:
        return
    names: list[str] = []  # the path from `top` down to the folder `fd` is
    try:
        while True:
            child = None
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        try:
                            if entry.is_dir(follow_symlinks=False):
                                child = entry.name
                                break
                            os.unlink(entry.name, dir_fd=fd)
                        except OSError:
                            continue
            except OSError:
                pass
            if child is not None:
                try:
                    with contextlib.suppress(OSError):
                        os.chmod(child, 0o700, dir_fd=fd)  # a folder the code made unreadable
                    inner = os.open(child, flags, dir_fd=fd)
                except OSError:
                    try:
                        os.rmdir(child, dir_fd=fd)
                        continue
                    except OSError:
                        break  # a folder that will not open nor go: stop rather than loop on it
                os.close(fd)
                fd = inner
                names.append(child)
                continue
            if not names:
                break
            parent = os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd = parent
            name = names.pop()
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                break  # a folder that will not go: stop rather than loop on it
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(top)
