"""Kernel-enforced limits for a whole run: a cgroup of its own, where this user may make one.

RLIMIT_NPROC bounds a run's processes for every user but root (Linux counts it per user namespace
since 5.14), and the supervisor inside the sandbox watches processes, memory and /tmp. But a
supervisor that polls cannot stop a fork bomb run by root: thousands of processes exist before its
next look. Where this process may create a cgroup (root on most systems; a delegated cgroup v2
subtree), each run gets one with `pids.max` and a memory limit, and is started inside it: a tiny
`/bin/sh` moves itself into the cgroup and then `exec`s bwrap, so nothing of the run ever exists
outside it. The cgroup is removed after the run.

Both cgroup v2 (one hierarchy; needs `pids` and `memory` in this cgroup's `subtree_control`)
and v1 (a `pids` and a `memory` hierarchy) are handled; anything else leaves the run to rlimits
and the supervisor.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from dataclasses import dataclass

__all__ = ["RunCgroup", "cgroup_support"]

_MOUNT = "/sys/fs/cgroup"


@dataclass(frozen=True, slots=True)
class _Parent:
    version: int
    pids: str  # the folder new pids cgroups go in
    memory: str  # the folder new memory cgroups go in (the same folder on v2)


_support: list[_Parent | None] = []
_lock = threading.Lock()


def cgroup_support() -> str | None:
    """"cgroup v1" / "cgroup v2" when runs get a cgroup of their own here, else None."""
    parent = _parent()
    return f"cgroup v{parent.version}" if parent else None


def _parent() -> _Parent | None:
    with _lock:
        if not _support:
            _support.append(_find())
        return _support[0]


def _find() -> _Parent | None:
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    v1: dict[str, str] = {}
    v2 = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            v2 = path
        for controller in controllers.split(","):
            v1[controller] = path
    if v2 is not None:
        for mount in (_MOUNT, _MOUNT + "/unified"):
            base = mount + v2.rstrip("/") if v2 != "/" else mount
            try:
                with open(os.path.join(base, "cgroup.subtree_control"), encoding="utf-8") as handle:
                    enabled = handle.read().split()
            except OSError:
                continue
            if {"pids", "memory"} <= set(enabled) and _can_make(base):
                return _Parent(2, base, base)
    if "pids" in v1 and "memory" in v1:
        pids = os.path.join(_MOUNT, "pids") + v1["pids"].rstrip("/")
        memory = os.path.join(_MOUNT, "memory") + v1["memory"].rstrip("/")
        if _can_make(pids) and _can_make(memory):
            return _Parent(1, pids, memory)
    return None


def _can_make(folder: str) -> bool:
    probe = os.path.join(folder, f"stiva-probe-{secrets.token_hex(4)}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        os.rmdir(probe)
    return True


class RunCgroup:
    """One run's cgroup(s). `wrap(argv)` starts the run inside; `close()` removes them."""

    def __init__(self, parent: _Parent, processes: int, memory_bytes: int):
        name = f"stiva-sandbox-{os.getpid()}-{secrets.token_hex(4)}"
        self.version = parent.version
        self.dirs = list(dict.fromkeys([os.path.join(parent.pids, name), os.path.join(parent.memory, name)]))
        made = []
        try:
            for folder in self.dirs:
                os.mkdir(folder)
                made.append(folder)
            pids_dir, memory_dir = os.path.join(parent.pids, name), os.path.join(parent.memory, name)
            _write(os.path.join(pids_dir, "pids.max"), str(processes))
            if parent.version == 2:
                _write(os.path.join(memory_dir, "memory.max"), str(memory_bytes))
                with contextlib.suppress(OSError):
                    _write(os.path.join(memory_dir, "memory.swap.max"), "0")
            else:
                _write(os.path.join(memory_dir, "memory.limit_in_bytes"), str(memory_bytes))
        except OSError:
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
            raise
        self.memory_dir = memory_dir

    @classmethod
    def create(cls, processes: int, memory_bytes: int) -> RunCgroup | None:
        parent = _parent()
        if parent is None:
            return None
        try:
            return cls(parent, processes, memory_bytes)
        except OSError:
            return None

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run by a shell that first moves itself into the cgroup(s); it exits 126 when a
        move fails, so nothing runs outside the limits."""
        script = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 126; shift; n=$((n-1)); done; '
                  'exec "$@"')
        procs = [os.path.join(folder, "cgroup.procs") for folder in self.dirs]
        return ["/bin/sh", "-c", script, "sh", str(len(procs)), *procs, *argv]

    def hit_memory_limit(self) -> bool:
        """Whether the kernel had to stop the run at its memory limit."""
        try:
            if self.version == 2:
                with open(os.path.join(self.memory_dir, "memory.events"), encoding="utf-8") as handle:
                    events = dict(line.split() for line in handle if line.strip())
                return int(events.get("oom_kill", "0")) > 0 or int(events.get("max", "0")) > 0
            with open(os.path.join(self.memory_dir, "memory.failcnt"), encoding="utf-8") as handle:
                return int(handle.read().strip() or 0) > 0
        except (OSError, ValueError):
            return False

    def close(self, within_s: float = 5.0) -> None:
        """Kill what is left in the cgroup(s) and remove them (blocking, at most `within_s`)."""
        deadline = time.monotonic() + within_s
        for folder in self.dirs:
            with contextlib.suppress(OSError):
                _write(os.path.join(folder, "cgroup.kill"), "1")  # v2 only
        pending = list(self.dirs)
        while pending and time.monotonic() < deadline:
            for folder in list(pending):
                try:
                    os.rmdir(folder)
                    pending.remove(folder)
                except FileNotFoundError:
                    pending.remove(folder)
                except OSError:
                    _kill_members(folder)
            if pending:
                time.sleep(0.02)


def _kill_members(folder: str) -> None:
    import signal

    try:
        with open(os.path.join(folder, "cgroup.procs"), encoding="utf-8") as handle:
            members = [int(line) for line in handle if line.strip()]
    except (OSError, ValueError):
        return
    for pid in members:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
