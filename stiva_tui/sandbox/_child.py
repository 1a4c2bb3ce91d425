"""What runs inside the sandbox: a supervisor, the harness around the untrusted code, and the
value codec both sides share.

This file is copied into the sandbox and run as `python -I -S child.py CONFIG`: it imports only the
standard library, never anything of Stiva's, and nothing here runs when Stiva imports it (Stiva
uses `encode_value` / `decode_value` from it, nothing else).

The process tree inside a sandbox:

    bwrap's init (pid 1) ── supervisor (this file, pid 2) ── worker (a fork: the harness + the code)

The supervisor holds the only copy of the status pipe. It forks the worker, which closes that pipe,
shuts itself into a Landlock domain where the kernel has one (no /proc; from ABI 6 no signal to a
process outside the domain), sets its own per-process limits and runs one of the modes below. The
supervisor then watches the whole sandbox until the worker exits: the number of processes, their
anonymous and shared memory, what the size-capped /tmp holds, and how many files /tmp and /dev/shm
hold. The memory counted includes the kernel's buffers no process maps: each unix socket of the
sandbox's network namespace and each pipe a process holds, at the most it may hold (the seccomp
filter keeps them at the kernel's default size and refuses message queues). Past a limit it reports which one and exits; its exit ends bwrap's init,
and with it the pid namespace and everything still in it (a double-forked `setsid` survivor too).

Modes (`mode` in the config):

- `script`:     the code as `__main__`, with the given stdin (stdin/stdout cases, plain runs).
- `functional`: the code loaded as a module; `fn_name` called on each case's arguments; each
                result crosses on the result pipe as an encoded value, compared by Stiva.
- `serve`:      the candidate half of assert-style tests: the code loaded, its own functions
                offered by name; calls arrive as encoded values on one pipe, results leave on
                another. The tests never run in this process.
- `tests`:      the other half, in a sandbox of its own: the tests run with a proxy for each
                offered function, which calls the candidate through the pipes. Only encoded
                plain values come back (no object whose `__eq__` lies), and the verdict leaves on
                a pipe only this process holds. It makes itself undumpable first.
"""

from __future__ import annotations

import base64
import json
import math
import os
import sys

_MAX_DEPTH = 64
_MAX_ITEMS = 1_000_000
MESSAGE_LIMIT = 16 * 1024 * 1024
"""Bytes of one message on a pipe (a call, a result, a verdict); longer is an error."""


# --- values that cross the sandbox's edge --------------------------------------------------------


class CrossingError(TypeError):
    """A value that cannot leave a sandbox: not plain data, too deep or too large."""


def encode_value(value, _depth=0, _count=None):
    """`value` as JSON data that keeps Python's plain types apart (a tuple stays a tuple, a set a
    set, a dict's keys their types). Only exact builtin types cross: a subclass (an int whose
    `__eq__` always says yes) or any other object raises CrossingError."""
    count = _count if _count is not None else [0]
    count[0] += 1
    if count[0] > _MAX_ITEMS or _depth > _MAX_DEPTH:
        raise CrossingError("the value is too large or too deeply nested to leave the sandbox")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if -(2**53) < value < 2**53 else {"$": "int", "v": str(value)}
    if kind is float:
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if kind is list:
        return [encode_value(item, _depth + 1, count) for item in value]
    if kind in (tuple, set, frozenset):
        items = [encode_value(item, _depth + 1, count) for item in value]
        return {"$": kind.__name__, "v": items}
    if kind is dict:
        pairs = [[encode_value(k, _depth + 1, count), encode_value(v, _depth + 1, count)] for k, v in value.items()]
        return {"$": "dict", "v": pairs}
    if kind is bytes:
        return {"$": "bytes", "v": base64.b64encode(value).decode("ascii")}
    if kind is complex:
        return {"$": "complex", "v": [encode_value(value.real), encode_value(value.imag)]}
    raise CrossingError(f"a value of type {kind.__name__} cannot leave the sandbox (plain data only)")


def decode_value(data, _depth=0):
    """The inverse of `encode_value`; raises CrossingError for anything it did not write."""
    if _depth > _MAX_DEPTH + 1:
        raise CrossingError("nested too deeply")
    kind = type(data)
    if data is None or kind in (bool, str, int, float):
        return data
    if kind is list:
        return [decode_value(item, _depth + 1) for item in data]
    if kind is dict and set(data) == {"$", "v"}:
        tag, body = data["$"], data["v"]
        if tag == "int" and type(body) is str and len(body) <= 5000:
            return int(body)
        if tag == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "bytes" and type(body) is str:
            return base64.b64decode(body)
        if type(body) is list:
            if tag == "tuple":
                return tuple(decode_value(item, _depth + 1) for item in body)
            if tag in ("set", "frozenset"):
                items = [decode_value(item, _depth + 1) for item in body]
                try:
                    return set(items) if tag == "set" else frozenset(items)
                except TypeError:
                    raise CrossingError("a set of unhashable values") from None
            if tag == "dict":
                out = {}
                for pair in body:
                    if type(pair) is not list or len(pair) != 2:
                        raise CrossingError("a malformed dict")
                    key = decode_value(pair[0], _depth + 1)
                    try:
                        out[key] = decode_value(pair[1], _depth + 1)
                    except TypeError:
                        raise CrossingError("a dict with an unhashable key") from None
                return out
            if tag == "complex" and len(body) == 2:
                return complex(decode_value(body[0]), decode_value(body[1]))
    raise CrossingError("not an encoded value")


# --- pipes ---------------------------------------------------------------------------------------


class _Pipe:
    """Newline-framed JSON messages on a file descriptor, each at most MESSAGE_LIMIT bytes."""

    def __init__(self, fd, mode):
        self.file = os.fdopen(fd, mode + "b", buffering=0 if mode == "w" else -1)

    def send(self, message):
        data = json.dumps(message, separators=(",", ":")).encode("utf-8")
        if len(data) > MESSAGE_LIMIT:
            data = json.dumps({"error": "CrossingError: the message is too large"}).encode("utf-8")
        self.file.write(data + b"\n")

    def receive(self):
        line = self.file.readline(MESSAGE_LIMIT + 1)
        if not line:
            return None
        if len(line) > MESSAGE_LIMIT:
            raise CrossingError("a message larger than the limit")
        return json.loads(line)


# --- the harness modes ---------------------------------------------------------------------------

# LeetCode-style answers use `List[int]` and `deque` without importing them, as the site allows;
# LiveCodeBench's own harness puts the same kind of imports before them. Builtins come last so
# that `pow` and the like stay the builtins.
_FUNCTIONAL_PRELUDE = (
    "from typing import *\nfrom collections import *\nfrom heapq import *\nfrom bisect import *\n"
    "from itertools import *\nfrom functools import *\nfrom math import *\nfrom builtins import *\n"
    "import collections, heapq, bisect, itertools, functools, math, string, re\n"
)


def _load(path, prelude=""):
    """The code at `path` run as a module named `__solution__` (an `if __name__ == "__main__":`
    demo in it does not run), in a namespace of its own."""
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    namespace = {"__name__": "__solution__", "__builtins__": __builtins__}
    if prelude:
        exec(prelude, namespace)
    exec(compile(source, "solution.py", "exec"), namespace)
    return namespace


def _describe(error):
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 2000 else text[:1997] + "..."


def _mode_script(cfg):
    import runpy

    sys.argv = [cfg["solution"]]
    runpy.run_path(cfg["solution"], run_name="__main__")


def _mode_functional(cfg):
    result = _Pipe(cfg["result_fd"], "w")
    namespace = _load(cfg["solution"], _FUNCTIONAL_PRELUDE)
    name = cfg["fn_name"]
    cls = namespace.get("Solution")
    if isinstance(cls, type) and hasattr(cls, name):
        function = getattr(cls(), name)
    elif callable(namespace.get(name)):
        function = namespace[name]
    else:
        raise NameError(f"the code defines no function {name!r}, nor a class Solution with it")
    with open(cfg["arguments"], encoding="utf-8") as handle:
        cases = json.load(handle)
    for index, arguments in enumerate(cases):
        try:
            outcome = {"case": index, "value": encode_value(function(*arguments))}
        except Exception as error:  # noqa: BLE001 - the candidate's own failure, reported
            outcome = {"case": index, "error": _describe(error)}
        result.send(outcome)
        if "error" in outcome:
            break


def _mode_serve(cfg):
    calls, replies = _Pipe(cfg["calls_fd"], "r"), _Pipe(cfg["replies_fd"], "w")
    try:
        namespace = _load(cfg["solution"])
    except BaseException as error:  # noqa: BLE001 - the code does not even load: the tests say so
        replies.send({"error": "the code failed to load: " + _describe(error)})
        raise
    # Only what the answer itself defines is offered: not `Counter` it imported, not builtins.
    offered = sorted(
        name
        for name, value in namespace.items()
        if not name.startswith("__") and callable(value) and getattr(value, "__module__", None) == "__solution__"
    )
    replies.send({"names": offered})
    while True:
        message = calls.receive()
        if message is None:
            return
        try:
            function = namespace[message["name"]]
            args = decode_value(message["args"])
            kwargs = decode_value(message["kwargs"])
            reply = {"value": encode_value(function(*args, **kwargs))}
        except BaseException as error:  # noqa: BLE001 - SystemExit too: it becomes the call's error
            reply = {"error": _describe(error), "type": type(error).__name__}
        replies.send(reply)


def _global_names(code):
    """Every name `code` or a function in it may look up as a global."""
    names, stack = set(), [code]
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(const for const in current.co_consts if hasattr(const, "co_names"))
    return names


class CandidateError(Exception):
    """The candidate raised what the tests must not take for control flow (StopIteration ending
    their `all(map(...))` early, say): any exception of the candidate fails the call's test."""


class _CandidateGone(Exception):
    """The candidate's process ended (or broke the protocol) during a call."""


def _proxy(name, calls, replies, builtin_errors):
    def call(*args, **kwargs):
        try:
            calls.send({"name": name, "args": encode_value(list(args)), "kwargs": encode_value(kwargs)})
            reply = replies.receive()
        except (OSError, ValueError) as error:
            raise _CandidateGone(f"the candidate's process ended during {name}(): {error}") from None
        if reply is None:
            raise _CandidateGone(f"the candidate's process ended during {name}()")
        if "error" in reply:
            kind = builtin_errors.get(reply.get("type"), CandidateError)
            raise kind(f"{name}() raised {reply['error']}")
        return decode_value(reply.get("value"))

    call.__name__ = call.__qualname__ = name
    return call


def _undumpable():
    """PR_SET_DUMPABLE 0: no /proc/<pid>/mem, no ptrace of this process, even by its own user."""
    _prctl(4, 0)


def _mode_tests(cfg):
    _undumpable()
    verdict = _Pipe(cfg["verdict_fd"], "w")
    calls, replies = _Pipe(cfg["calls_fd"], "w"), _Pipe(cfg["replies_fd"], "r")
    try:
        hello = replies.receive()
    except (OSError, ValueError) as error:
        hello = {"error": f"no answer from the candidate's process: {error}"}
    if not isinstance(hello, dict) or "names" not in hello:
        verdict.send({"passed": False, "error": (hello or {}).get("error") or "the candidate's process ended"})
        return
    import builtins

    builtin_errors = {
        name: value
        for name, value in vars(builtins).items()
        if isinstance(value, type)
        and issubclass(value, Exception)
        and not issubclass(value, (StopIteration, StopAsyncIteration))
    }
    with open(cfg["tests"], encoding="utf-8") as handle:
        source = handle.read()
    namespace = {"__name__": "__tests__"}
    try:
        code = compile(source, "tests.py", "exec")
    except BaseException as error:  # noqa: BLE001 - tests that do not compile fail
        verdict.send({"passed": False, "error": "the tests do not compile: " + _describe(error)})
        return
    # Only names the tests look up as globals reach them, and never one of Python's builtins: an
    # answer's own `abs`, `sorted` or `len` must not stand in for the real ones the tests use.
    wanted = _global_names(code)
    for name in hello["names"]:
        if type(name) is str and name.isidentifier() and name in wanted and not hasattr(builtins, name):
            namespace[name] = _proxy(name, calls, replies, builtin_errors)
    try:
        exec(code, namespace)
    except BaseException as error:  # noqa: BLE001 - any way out but the end is a failure
        where = ""
        tb = error.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "tests.py":
                where = f"tests.py line {tb.tb_lineno}: "
            tb = tb.tb_next
        verdict.send({"passed": False, "error": where + _describe(error)})
        return
    verdict.send({"passed": True})


_MODES = {"script": _mode_script, "functional": _mode_functional, "serve": _mode_serve, "tests": _mode_tests}


# --- limits and the supervisor -------------------------------------------------------------------


def _limit(resource, name, value):
    which = getattr(resource, name, None)
    if which is None:
        return
    try:
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))  # soft = hard: the code cannot raise it again
    except (ValueError, OSError):
        pass


def _worker_limits(limits):
    try:
        import resource
    except ImportError:
        return
    mb = 1024 * 1024
    _limit(resource, "RLIMIT_AS", limits["memory_mb"] * mb)
    _limit(resource, "RLIMIT_CPU", limits["cpu_s"])
    _limit(resource, "RLIMIT_FSIZE", limits["disk_mb"] * mb)
    _limit(resource, "RLIMIT_CORE", 0)
    _limit(resource, "RLIMIT_NOFILE", _NOFILE)
    # POSIX message queues are kernel memory no process maps (mq_open is refused by the seccomp
    # filter too; SysV queues as well)
    _limit(resource, "RLIMIT_MSGQUEUE", 0)


# Landlock (Linux >= 5.13): the rights a ruleset can handle at each ABI version, and its scopes.
_LANDLOCK_FS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_LANDLOCK_FILE = 1 | 2 | 4 | 1 << 14 | 1 << 15  # execute, write, read, truncate, ioctl on a device
_LANDLOCK_NET = 3  # ABI 4: bind and connect TCP (none allowed: no inet socket exists anyway)
_LANDLOCK_SCOPES = 3  # ABI 6: abstract unix sockets and signals outside the domain


def _landlock_version(libc):
    import ctypes

    return libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))


def _hide_host():
    """Shut the worker (and the code) into a Landlock domain: every folder at the root but /proc,
    and, from ABI 6, no signal to a process outside it (the supervisor, bwrap's init) and no
    abstract unix socket outside it. /proc is only the sandbox's, but its files still tell of the
    host: mount options, the interpreter's path, boot time; the code needs none of them. Returns
    the ABI version applied, 0 where the kernel has no Landlock; exits where applying it failed."""
    import ctypes
    import struct

    libc = ctypes.CDLL(None, use_errno=True)
    abi = _landlock_version(libc)
    if abi < 1:
        return 0
    fs = _LANDLOCK_FS[max(v for v in _LANDLOCK_FS if v <= abi)]
    fields = [fs] + ([_LANDLOCK_NET] if abi >= 4 else []) + ([_LANDLOCK_SCOPES] if abi >= 6 else [])
    attr = struct.pack(f"={len(fields)}Q", *fields)
    ruleset = libc.syscall(ctypes.c_long(444), attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    try:
        if ruleset < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
        for name in sorted(os.listdir("/")):
            path = "/" + name
            if name in ("proc", "sys") or os.path.islink(path):
                continue  # a link at the root leads into a folder that has a rule of its own
            # a file bound at the root (a `read_only` path) takes only the rights of a file
            rights = fs if os.path.isdir(path) else fs & _LANDLOCK_FILE
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", rights, fd)  # struct landlock_path_beneath_attr, packed
                if libc.syscall(ctypes.c_long(445), ruleset, 1, rule, ctypes.c_uint32(0)) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        if libc.syscall(ctypes.c_long(446), ruleset, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    except OSError as error:
        sys.stderr.write(f"sandbox: could not apply Landlock (ABI {abi}): {error}\n")
        sys.stderr.flush()
        os._exit(1)
    finally:
        if ruleset >= 0:
            os.close(ruleset)
    return abi


def _run_worker(cfg):
    os.close(cfg["status_fd"])
    if cfg.get("drop"):
        # A change of uid made this process undumpable: its descriptors would be hidden from the
        # supervisor, which counts the pipes in them (the code runs as this uid anyway)
        _prctl(4, 1)
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    if cfg.get("landlock"):
        _hide_host()
    _worker_limits(cfg["limits"])
    code = 0
    try:
        _MODES[cfg["mode"]](cfg)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - the code's own error: its traceback on stderr, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed or broken stdout
        pass
    os._exit(code & 0xFF)


def _processes(me):
    """How many processes the sandbox holds besides bwrap's init and the supervisor (cheap)."""
    return sum(1 for entry in os.listdir("/proc") if entry.isdigit() and int(entry) not in (1, me))


# Kernel buffers that no process maps, charged at the most each may hold. The seccomp filter keeps
# every socket and pipe at the kernel's default size (no SO_SNDBUF, SO_RCVBUF nor F_SETPIPE_SZ) and
# refuses SysV IPC, POSIX message queues and vmsplice.
_NOFILE = 256  # the worker's RLIMIT_NOFILE
_PIPE_BYTES = 16 * 4096  # a pipe's 16 default pages


def _sysctl(path, default):
    try:
        with open(path, "rb") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def _socket_charges():
    """(bytes charged for a unix stream socket, for a datagram or seqpacket one). A stream socket
    queues at most its send buffer (and one message more) towards its peer; a datagram one, a
    queue of max_dgram_qlen messages from any number of senders, each up to a send buffer (and
    half again of the kernel's own)."""
    buffer = _sysctl("/proc/sys/net/core/wmem_default", 212992)
    queue = _sysctl("/proc/sys/net/unix/max_dgram_qlen", 10)
    return 3 * buffer, (queue + 3) * buffer * 3 // 2


def _sockets(charges):
    """What the sandbox's unix sockets may hold: every one in its network namespace (one a process
    hides its descriptors from, or one in flight in a message, too), each at its charge."""
    stream, other = charges
    total = 0
    try:
        with open("/proc/net/unix", "rb") as handle:
            next(handle, None)
            for line in handle:
                fields = line.split()
                if len(fields) >= 5:
                    total += stream if fields[4] == b"0001" else other
    except OSError:
        pass
    return total


def _pipes(me):
    """What the sandbox's pipes may hold: each pipe a process holds, at its 16 default pages; a
    process whose descriptors cannot be read (it made itself undumpable) at as many pipes as its
    descriptor limit allows."""
    seen = set()
    hidden = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (1, me):
            continue
        folder = f"/proc/{entry}/fd"
        try:
            names = os.listdir(folder)
        except PermissionError:
            hidden += 1
            continue
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"{folder}/{name}")
            except OSError:
                continue
            if target.startswith("pipe:"):
                seen.add(target)
    return (len(seen) + hidden * _NOFILE) * _PIPE_BYTES


def _usage(me, tmp, charges=(0, 0)):
    """(memory in bytes, bytes in /tmp) of the whole sandbox. Memory is each process's anonymous
    and shared memory (RssAnon + RssShmem: a MAP_SHARED anonymous mapping is shmem, which statm's
    "shared" column would subtract); pages two processes share count twice, on the safe side. The
    kernel's socket and pipe buffers are added at what they may hold (`_sockets`, `_pipes`)."""
    memory = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (1, me):
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as handle:
                for line in handle:
                    if line.startswith((b"RssAnon:", b"RssShmem:")):
                        memory += int(line.split()[1]) * 1024
        except (OSError, IndexError, ValueError):
            continue
    # /dev/shm's pages are memory the code holds, whether or not a process maps them
    if any(charges):
        memory += _sockets(charges) + _pipes(me)
    return memory + _used("/dev/shm"), _used(tmp)


def _inodes(folders):
    """Files, folders, links and hard links in `folders` (tmpfs counts each against nr_inodes,
    and statvfs reports it): an empty file takes no block, but kernel memory all the same."""
    count = 0
    for folder in folders:
        try:
            stat = os.statvfs(folder)
            count += stat.f_files - stat.f_ffree
        except OSError:
            continue
    return count


def _used(folder):
    try:
        stat = os.statvfs(folder)
        return (stat.f_blocks - stat.f_bfree) * stat.f_frsize
    except OSError:
        return 0


def _supervise(cfg):
    import select
    import signal

    status = _Pipe(cfg["status_fd"], "w")
    limits = cfg["limits"]
    try:
        import resource

        # Counted per user namespace (Linux >= 5.14) for every user but root: forks past it fail.
        _limit(resource, "RLIMIT_NPROC", limits["processes"] + 1)
    except ImportError:
        pass
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    pid = os.fork()
    if pid == 0:
        os.close(wake_r)
        os.close(wake_w)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _run_worker(cfg)
    _undumpable()
    watch = cfg.get("watch", False)
    me, mb = os.getpid(), 1024 * 1024
    tick = 0
    writable = (cfg["tmp"], "/dev/shm")
    files_at_start = _inodes(writable) if watch else 0
    charges = _socket_charges() if watch else (0, 0)
    while True:
        done, state = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(state)
            status.send({"exit": code})
            os._exit(0)
        if watch:
            # processes and files every 2 ms (a fork bomb grows fast, and so do empty files),
            # memory and /tmp's bytes every 20 ms
            over = None
            if _processes(me) > limits["processes"]:
                over = f"processes: more than {limits['processes']} at once"
            elif _inodes(writable) - files_at_start > limits["files"]:
                over = f"files: more than {limits['files']} in /tmp and /dev/shm"
            elif tick % 10 == 0:
                private, used = _usage(me, cfg["tmp"], charges)
                if private > limits["memory_mb"] * mb:
                    over = f"memory: more than {limits['memory_mb']} MB in all"
                elif used > limits["disk_mb"] * mb:
                    over = f"disk: more than {limits['disk_mb']} MB written"
            if over:
                status.send({"limit": over})
                os._exit(0)  # bwrap's init follows, and the pid namespace ends every process in it
        tick += 1
        try:
            select.select([wake_r], [], [], 0.002 if watch else 0.05)
            os.read(wake_r, 512)
        except (BlockingIOError, InterruptedError):
            pass


def _prctl(option, value):
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except Exception:  # noqa: BLE001 - no prctl here (not Linux)
        return -1


def _clear_capabilities():
    """capset(2) with the inheritable set empty (bwrap leaves the kept capabilities there; a dropped
    uid could not use them, with no_new_privs and no ambient set, but need not keep them). The
    effective and permitted sets go with the change of uid."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        data = (ctypes.c_uint32 * 6)()  # {effective, permitted, inheritable} x {low, high word}
        libc.capget(header, data)
        data[2] = data[5] = 0
        libc.capset(header, data)
    except Exception:  # noqa: BLE001 - checked by the caller through /proc/self/status
        pass


def _drop(uid, gid):
    """Become `uid`:`gid` for good, with no groups and no capabilities, or end the run: a root
    Stiva's bwrap starts the supervisor as root (no user namespace), and no code may run so."""
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        _clear_capabilities()
        os.setresuid(uid, uid, uid)
        with open("/proc/self/status", encoding="utf-8") as handle:
            caps = {line.split(":")[0]: int(line.split()[1], 16) for line in handle if line.startswith("Cap")}
        if (
            os.getresuid() != (uid, uid, uid)
            or os.getresgid() != (gid, gid, gid)
            or os.getgroups()
            or any(caps.get(name, 1) for name in ("CapInh", "CapPrm", "CapEff", "CapAmb"))
        ):
            raise PermissionError(f"still uid {os.getresuid()}, gid {os.getresgid()}, capabilities {caps}")
    except (OSError, ValueError) as error:
        sys.stderr.write(f"sandbox: could not drop root to uid {uid}: {error}\n")
        sys.stderr.flush()
        os._exit(1)


def main(argv):
    with open(argv[1], encoding="utf-8") as handle:
        cfg = json.load(handle)
    if cfg.get("drop"):
        uid, gid = cfg["drop"]
        _drop(int(uid), int(gid))
    _prctl(38, 1)  # PR_SET_NO_NEW_PRIVS: no set-uid program gives any of it back
    _supervise(cfg)


if __name__ == "__main__":
    main(sys.argv)
