"""Run answered Python code away from Stiva: a fresh, limited, network-less child process.

A bench grades code that a model wrote, so that code never runs in Stiva's own process. Each call
starts `python -I` in a new temporary directory and a new session (its own process group, killed
as a whole on timeout), with an environment that carries no proxies, keys or tokens. Before the
user's code runs, a small bootstrap inside the child:

1. tries `unshare(CLONE_NEWUSER | CLONE_NEWNET)` through ctypes (Linux): the child gets a network
   namespace with no interfaces, not even a working loopback, and loses every capability in the
   parent namespace (so not even root can raise the limits again). Failure is ignored: many
   kernels and containers forbid unprivileged user namespaces.
2. sets RLIMIT_AS (memory), RLIMIT_CPU (so a spinning child dies even if Stiva does), RLIMIT_FSIZE
   (disk, and the captured output), RLIMIT_NPROC (fork bombs; not enforced for root) and
   RLIMIT_CORE=0, where the platform has them;
3. installs a `sys.addaudithook` guard, which the guarded code cannot remove: it refuses socket
   connect/bind/sendto/sendmsg and name look-ups, starting other programs (a `curl` would get
   round the socket guard where there is no network namespace), raising resource limits, signals
   to other processes, and fetching those same libc functions through ctypes.

The limits are set by that bootstrap rather than by a `preexec_fn`: `preexec_fn` is documented as
unsafe when the parent has threads, and the bench runner calls this from an event loop that has
them. Nothing the guarded code runs happens before the bootstrap, so the effect is the same.

What this does not stop: a grandchild that calls `setsid()` leaves the process group and outlives
the kill; code determined to escape the audit hook (say, by poking interpreter memory with
ctypes) still meets the namespace where there is one, and the limits everywhere.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["OUTPUT_LIMIT", "SandboxResult", "run_code", "run_code_async"]

OUTPUT_LIMIT = 64 * 1024
"""Bytes of stdout and of stderr kept by default; the rest is dropped and `truncated` is set."""

FILE_LIMIT_MB = 32
"""RLIMIT_FSIZE for the child: no file it writes, its stdout and stderr included, grows past this."""

_NPROC_MARGIN = 64  # tasks the child may add to what its user already runs: threads, a few forks


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """What a sandboxed run did. `ok` means it exited with status 0 within its time.

    `returncode` is negative for a signal (-9: killed on timeout or by RLIMIT_CPU's hard limit,
    -24: SIGXCPU, -25: SIGXFSZ, output or a file past `FILE_LIMIT_MB`) and None only when the
    child could not be started.
    """

    ok: bool
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool = False


def run_code(source: str, *, stdin: str | None = None, timeout_s: float = 10,
             memory_mb: int = 512, output_limit: int = OUTPUT_LIMIT,
             isolate_namespaces: bool = True) -> SandboxResult:
    """Run `source` as `__main__` in a sandboxed child and wait for it (at most `timeout_s`).

    Blocks the calling thread; from async code use `run_code_async`. `isolate_namespaces=False`
    skips the `unshare` step, so tests can check the audit-hook guard on its own.
    """
    with _prepared(source, stdin, timeout_s, memory_mb, isolate_namespaces) as job:
        try:
            proc = subprocess.Popen(job.argv, stdin=job.stdin, stdout=job.stdout, stderr=job.stderr,
                                    cwd=job.workdir, env=job.env, start_new_session=True)
        except OSError as error:
            return SandboxResult(False, None, "", f"sandbox: could not start Python: {error}", False)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc.pid)
            if proc.poll() is None:  # no process groups here (not POSIX)
                proc.kill()
            proc.wait()
        return job.result(proc.returncode, timed_out, output_limit)


async def run_code_async(source: str, *, stdin: str | None = None, timeout_s: float = 10,
                         memory_mb: int = 512, output_limit: int = OUTPUT_LIMIT,
                         isolate_namespaces: bool = True) -> SandboxResult:
    """`run_code` without blocking the event loop; cancelling it kills the child's whole group."""
    with _prepared(source, stdin, timeout_s, memory_mb, isolate_namespaces) as job:
        try:
            proc = await asyncio.create_subprocess_exec(
                *job.argv, stdin=job.stdin, stdout=job.stdout, stderr=job.stderr,
                cwd=job.workdir, env=job.env, start_new_session=True)
        except OSError as error:
            return SandboxResult(False, None, "", f"sandbox: could not start Python: {error}", False)
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout=timeout_s)
        except TimeoutError:
            timed_out = True
        finally:
            _kill_group(proc.pid)
            if proc.returncode is None:
                try:
                    proc.kill()  # no process groups here (not POSIX), or it is already gone
                except ProcessLookupError:
                    pass
            await proc.wait()
        return job.result(proc.returncode, timed_out, output_limit)


# --- one run's files and command line -----------------------------------------------------------


@dataclass(slots=True)
class _Job:
    argv: list[str]
    workdir: str
    env: dict[str, str]
    stdin: IO[bytes] | int
    stdout: IO[bytes]
    stderr: IO[bytes]

    def result(self, returncode: int | None, timed_out: bool, output_limit: int) -> SandboxResult:
        stdout, cut_out = _read_capped(self.stdout, output_limit)
        stderr, cut_err = _read_capped(self.stderr, output_limit)
        ok = returncode == 0 and not timed_out
        return SandboxResult(ok, returncode, stdout, stderr, timed_out, cut_out or cut_err)


@contextmanager
def _prepared(source: str, stdin: str | None, timeout_s: float, memory_mb: int,
              isolate_namespaces: bool) -> Iterator[_Job]:
    """A temporary directory holding the code, unlinked files for the output, the command line;
    all removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="stiva-sandbox-", ignore_cleanup_errors=True) as workdir, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryFile() as given:
        script = Path(workdir) / "solution.py"
        script.write_text(source, encoding="utf-8")
        if stdin is not None:
            given.write(stdin.encode("utf-8"))
            given.seek(0)
        config = {
            "script": str(script),
            "memory_mb": int(memory_mb),
            "cpu_s": max(1, math.ceil(timeout_s)) + 1,
            "file_mb": FILE_LIMIT_MB,
            "nproc_margin": _NPROC_MARGIN,
            "isolate": bool(isolate_namespaces),
        }
        argv = [sys.executable, "-I", "-B", "-X", "utf8", "-c", _BOOTSTRAP, json.dumps(config)]
        yield _Job(argv, workdir, _child_env(workdir), given if stdin is not None else subprocess.DEVNULL,
                   out, err)


def _child_env(workdir: str) -> dict[str, str]:
    """Only what Python needs: no proxies, no keys, no tokens, nothing inherited."""
    return {
        "PATH": os.defpath,
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # Native maths libraries start a thread per core and reserve memory for each.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _read_capped(handle: IO[bytes], limit: int) -> tuple[str, bool]:
    handle.seek(0)
    data = handle.read(limit + 1)
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


def _kill_group(pid: int) -> None:
    """SIGKILL the child's process group: the child and whatever it forked that stayed in it."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        pass


# --- the bootstrap the child runs before the user's code -----------------------------------------
# Kept as plain text so that the child imports nothing of Stiva's; argv[1] is its JSON config.

_BOOTSTRAP = r'''
import json, os, sys

def _isolate():
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(0x10000000 | 0x40000000) == 0  # CLONE_NEWUSER | CLONE_NEWNET
    except Exception:
        return False

def _user_tasks():
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat("/proc/" + entry).st_uid == uid:
                    count += len(os.listdir("/proc/" + entry + "/task"))
            except OSError:
                pass
    return count

def _limit(resource, name, soft, hard=None):
    which = getattr(resource, name, None)
    if which is None:
        return
    hard = soft if hard is None else hard
    try:
        current = resource.getrlimit(which)[1]
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        resource.setrlimit(which, (soft, hard))
    except (ValueError, OSError):
        pass

def _limits(cfg):
    try:
        import resource
    except ImportError:
        return
    mb = 1024 * 1024
    _limit(resource, "RLIMIT_AS", cfg["memory_mb"] * mb)
    _limit(resource, "RLIMIT_CPU", cfg["cpu_s"], cfg["cpu_s"] + 1)  # SIGXCPU, then SIGKILL
    _limit(resource, "RLIMIT_FSIZE", cfg["file_mb"] * mb)
    _limit(resource, "RLIMIT_CORE", 0)
    if os.path.isdir("/proc"):
        _limit(resource, "RLIMIT_NPROC", _user_tasks() + cfg["nproc_margin"])

_BLOCKED = frozenset({
    "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.sendto", "socket.sendmsg",
    "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo",
    "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.startfile",
    "resource.setrlimit", "resource.prlimit", "os.setns", "os.unshare",
})
_BLOCKED_SYMBOLS = frozenset({
    "connect", "bind", "sendto", "sendmsg", "socket", "getaddrinfo", "gethostbyname",
    "execve", "execv", "execvp", "execl", "execlp", "system", "popen", "posix_spawn", "posix_spawnp",
    "setrlimit", "prlimit", "prlimit64", "unshare", "setns", "syscall", "kill", "killpg",
})

def _guard(event, args, _own=(os.getpid(), 0)):
    if event in _BLOCKED:
        raise PermissionError("sandbox: " + event + " is not allowed (no network, no other programs)")
    if event.startswith("ctypes.dlsym") and len(args) > 1 and args[1] in _BLOCKED_SYMBOLS:
        raise PermissionError("sandbox: ctypes access to " + str(args[1]) + " is not allowed")
    if event in ("os.kill", "os.killpg") and args and args[0] not in _own:
        raise PermissionError("sandbox: signals to other processes are not allowed")

_cfg = json.loads(sys.argv[1])
if _cfg["isolate"]:
    _isolate()
_limits(_cfg)
sys.addaudithook(_guard)
sys.argv = [_cfg["script"]]
import runpy
runpy.run_path(_cfg["script"], run_name="__main__")
'''
