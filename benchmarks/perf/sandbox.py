"""Code sandbox benchmark, run by hand: `python -m benchmarks.perf.sandbox` (saves sandbox.json beside itself).

What one code item costs to grade, isolated (bubblewrap: namespaces, seccomp, a supervisor, a
cgroup where one can be made; assert-style tests in a second sandbox) against the sandbox before
this one (a `python -I` child with rlimits and an audit hook, loaded from git history at commit
2f28d06 so that both run in one process, interleaved). Three item shapes: assert-style tests (the
built-in `basic` suite's code items), a stdin/stdout case, functional cases. Then items per second
at concurrency 1 and 8 for the isolated grader.

The machines here are shared and noisy: compare the figures of one run, not across runs.
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import ROOT, machine, save_json
from stiva_tui.evals.graders import grade_async
from stiva_tui.evals.suite import SuiteItem
from stiva_tui.sandbox import SandboxSettings, find_isolation
from stiva_tui.sandbox.cgroups import cgroup_support

HERE = Path(__file__).resolve().parent

OLD_COMMIT = "2f28d06"
ADD = "def add(a, b):\n    return a + b\n"
TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\nassert add(10, 5) == 15"


def old_sandbox():
    """The pre-bubblewrap sandbox module, from git history (None outside a git checkout)."""
    try:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{OLD_COMMIT}:stiva_tui/bench/sandbox.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "old_sandbox.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_sandbox", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_sandbox"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def old_assert_source(code: str, tests: str) -> str:
    return (
        f"_ns = {{'__name__': '__solution__'}}\nexec(compile({code!r}, 'solution.py', 'exec'), _ns)\n"
        f"exec(compile({tests!r}, 'tests.py', 'exec'), _ns)\nprint('passed')\n"
    )


ITEMS = {
    "assert-style": (
        SuiteItem.model_validate({"id": "a", "question": "q", "grader": "code", "tests": TESTS}),
        old_assert_source(ADD, TESTS),
        None,
    ),
    "stdin/stdout": (
        SuiteItem.model_validate(
            {
                "id": "s",
                "question": "q",
                "grader": "code",
                "tests": {"stdin_stdout": [{"input": "2 3\n", "output": "5\n"}]},
            }
        ),
        "a, b = map(int, input().split())\nprint(a + b)\n",
        "2 3\n",
    ),
    "functional": (
        SuiteItem.model_validate(
            {
                "id": "f",
                "question": "q",
                "grader": "code",
                "tests": {
                    "functional": {
                        "fn_name": "add",
                        "cases": [{"input": [2, 3], "output": 5}, {"input": [1, 1], "output": 2}],
                    }
                },
            }
        ),
        ADD + "print(add(2, 3)); print(add(1, 1))\n",
        None,
    ),
}
ANSWERS = {"assert-style": ADD, "stdin/stdout": "a, b = map(int, input().split())\nprint(a + b)\n", "functional": ADD}


async def time_new(shape: str, settings: SandboxSettings) -> float:
    item, _, _ = ITEMS[shape]
    started = time.perf_counter()
    verdict = await grade_async(item, f"```python\n{ANSWERS[shape]}```", sandbox=settings)
    assert verdict.correct, verdict
    return time.perf_counter() - started


async def time_old(module, shape: str) -> float:
    _, source, stdin = ITEMS[shape]
    started = time.perf_counter()
    result = await module.run_code_async(source, stdin=stdin)
    assert result.ok, result.stderr
    return time.perf_counter() - started


async def per_item(rounds: int) -> dict:
    settings = SandboxSettings()
    module = old_sandbox()
    figures = {}
    for shape in ITEMS:
        new, old = [], []
        for _ in range(rounds):  # interleaved, so both see the same machine
            new.append(await time_new(shape, settings))
            if module is not None:
                old.append(await time_old(module, shape))
        row = {
            "isolated_ms_p50": round(statistics.median(new) * 1000, 1),
            "isolated_ms_p90": round(sorted(new)[int(0.9 * len(new))] * 1000, 1),
        }
        if old:
            row["before_ms_p50"] = round(statistics.median(old) * 1000, 1)
            row["overhead_ms_p50"] = round((statistics.median(new) - statistics.median(old)) * 1000, 1)
            row["ratio_p50"] = round(statistics.median(new) / statistics.median(old), 2)
        figures[shape] = row
        print(
            f"{shape:<13} isolated p50 {row['isolated_ms_p50']:7.1f} ms"
            + (f"   before {row['before_ms_p50']:6.1f} ms   x{row['ratio_p50']}" if old else "")
        )
    return figures


async def throughput(concurrency: int, items: int) -> float:
    settings = SandboxSettings()
    gate = asyncio.Semaphore(concurrency)

    async def one():
        async with gate:
            await time_new("assert-style", settings)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(items)))
    return items / (time.perf_counter() - started)


async def main() -> None:
    settings = SandboxSettings()
    iso = find_isolation(settings)
    print(iso.describe(settings), "·", cgroup_support() or "no cgroup")
    await time_new("assert-style", settings)  # warm: the probe, imports
    figures = await per_item(rounds=30)
    rates = {}
    for concurrency in (1, 8):
        rate = await throughput(concurrency, 48)
        rates[f"concurrency_{concurrency}"] = round(rate, 1)
        print(f"assert-style items/s at concurrency {concurrency}: {rate:.1f}")
    out = {
        "machine": machine(),
        "isolation": iso.describe(settings),
        "whole_run_limits": cgroup_support() or "rlimits and the supervisor's watch",
        "per_item": figures,
        "items_per_s_assert_style": rates,
        "note": "before = the python -I + rlimits + audit-hook sandbox of commit 2f28d06; one run, interleaved",
    }
    print(f"saved {save_json(HERE / 'sandbox.json', out)}")


if __name__ == "__main__":
    asyncio.run(main())
