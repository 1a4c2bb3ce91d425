"""The shared helpers live in one importable package, `tests.support`, used by tests and benchmarks
alike: nobody edits `sys.path`, and one `stiva()` runs the real command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.cli import STIVA, stiva

ROOT = Path(__file__).resolve().parent.parent
# a subprocess runner of its own: a `stiva()`/`_stiva()` with `home=`, or the console script's path again
DEFINES_STIVA = re.compile(r"^\s*def _?stiva\(\*args: str, home|^STIVA = .*sys\.executable", re.M)


def _sources() -> list[Path]:
    return sorted([*ROOT.joinpath("tests").rglob("*.py"), *ROOT.joinpath("benchmarks").rglob("*.py")])


def test_no_test_or_benchmark_edits_sys_path():
    edits = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in _sources()
        if path.name != "test_support.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "sys.path.insert" in line or "sys.path.append" in line
    ]
    assert edits == []


def test_one_stiva_helper():
    defined = [
        path.relative_to(ROOT).as_posix()
        for path in _sources()
        if DEFINES_STIVA.search(path.read_text(encoding="utf-8"))
    ]
    assert defined == ["tests/support/cli.py"]


def test_stiva_runs_the_real_command_in_its_home(tmp_path):
    done = stiva("--help", home=tmp_path, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("usage: stiva"), done.stderr[-2000:]
    assert Path(STIVA).parent == Path(sys.executable).parent


def test_stiva_with_what_exits_the_benchmark_with_its_stderr(tmp_path):
    script = f"from tests.support.cli import stiva\nstiva('no-such-command', home={str(tmp_path)!r}, what='the step')\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stdout.startswith("$ stiva no-such-command") and "the step: exit 2" in done.stdout
    assert "the step failed:" in done.stderr and "Traceback" not in done.stderr


def test_a_benchmark_runs_as_a_module_from_the_root():
    code = "import benchmarks.harness as h; m = h.machine(); print(sorted(m))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(sorted(["arch", "cpus", "load_1min", "platform", "python", "torch"]))
    assert "torch\n" not in done.stderr
