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

__all__ = ["RunCgroup", "cgroup_support", "sweep_orphans"]

_MOUNT = "/sys/fs/cgroup"
_PREFIX = "stiva-sandbox-"
_WRAP = (
    "import os, sys\n"
    "try:\n"
    "    n = int(sys.argv[1])\n"
    "    for path in sys.argv[2:2 + n]:\n"
    "        fd = os.open(path, os.O_WRONLY)\n"
    "        os.write(fd, str(os.getpid()).encode())\n"
    "        os.close(fd)\n"
    "except BaseException as error:\n"
    "    sys.stderr.write(f'sandbox: could not join the run cgroup: {error}\\n')\n"
    "    os._exit(126)\n"
    "os.execv(sys.argv[2 + n], sys.argv[3 + n:])\n"
)


@dataclass(frozen=True, slots=True)
class _Parent:
    version: int
    pids: str  # the folder new pids cgroups go in
    memory: str  # the folder new memory cgroups go in (the same folder on v2)


_support: list[_Parent | None] = []
_lock = threading.Lock()


def cgroup_support() -> str | None:
    """ "cgroup v1" / "cgroup v2" when runs get a cgroup of their own here, else None."""
    parent = _parent()
    return f"cgroup v{parent.version}" if parent else None


def _parent() -> _Parent | None:
    with _lock:
        if not _support:
            parent = _find()
            _support.append(parent)
            if parent is not None:
                sweep_orphans(parent)
        return _support[0]


def sweep_orphans(parent: _Parent | None = None) -> list[str]:
    """Remove the run cgroups an earlier Stiva left behind (killed with -9 mid-run): those named
    for a pid that is gone, or for a pid that started after the folder was made (a reused pid).
    What is still in them is killed first. Returns the folders removed."""
    parent = parent or _parent()
    if parent is None:
        return []
    removed = []
    for base in dict.fromkeys([parent.pids, parent.memory]):
        try:
            names = [name for name in os.listdir(base) if name.startswith(_PREFIX)]
        except OSError:
            continue
        for name in names:
            folder = os.path.join(base, name)
            if _owner_alive(name, folder):
                continue
            with contextlib.suppress(OSError):
                _write(os.path.join(folder, "cgroup.kill"), "1")
            _kill_members(folder)
            for _ in range(50):
                try:
                    os.rmdir(folder)
                    removed.append(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
    return removed


def _owner_alive(name: str, folder: str) -> bool:
    try:
        pid = int(name[len(_PREFIX) :].split("-", 1)[0])
    except ValueError:
        return True  # not one of ours: leave it
    if pid == os.getpid():
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])  # field 22: start time
        made = os.stat(folder).st_ctime
    except FileNotFoundError:
        return False
    except (OSError, ValueError, IndexError):
        return True
    started = _boot_time() + ticks / os.sysconf("SC_CLK_TCK")
    return started <= made + 2.0


def _boot_time() -> float:
    try:
        with open("/proc/stat", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0.0


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
        name = f"{_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
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

    def wrap(self, argv: list[str], *, executable: str, python: str) -> list[str]:
        """`argv` (run as `executable`) started by a tiny Python that first moves itself into the
        cgroup(s); it exits 126 when a move fails, so nothing runs outside the limits. Python, not
        a shell: `argv[0]` stays what the caller chose (the sandbox sees no host path in it)."""
        procs = [os.path.join(folder, "cgroup.procs") for folder in self.dirs]
        return [python, "-I", "-S", "-c", _WRAP, str(len(procs)), *procs, executable, *argv]

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
