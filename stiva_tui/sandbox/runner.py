"""Running untrusted code in the sandbox, and bringing back only what Stiva decides on.

Three kinds of run, all through one launcher (`_start`) and one collector (`_finish`):

- `run_code_async(source, stdin=...)`: the code as `__main__`; stdout and stderr come back, each
  capped by bytes kept (the rest is read and dropped, so a chatty answer neither blocks nor fills
  memory or disk).
- `run_functional_async(source, fn_name, cases)`: each case's result comes back as an encoded
  value on a pipe of its own, for the caller to compare; stdout is only for the reader.
- `run_with_tests_async(source, tests)`: assert-style tests in a second sandbox, calling the
  candidate's functions through pipes that carry encoded plain values only; the verdict comes
  back on a pipe that only the tests' process holds.

No marker in stdout, exit code of the candidate, or file it can see decides a pass.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from . import _child
from .settings import SandboxSettings

__all__ = [
    "FunctionalOutcome",
    "SandboxResult",
    "TestedResult",
    "run_code",
    "run_code_async",
    "run_functional_async",
    "run_with_tests_async",
]

from .detect import find_isolation
from .launch import SandboxResult, _close, _finish, _start, _why, run_sync

_DEFAULT = SandboxSettings()


@dataclass(frozen=True, slots=True)
class FunctionalOutcome:
    case: int
    value: Any = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class TestedResult:
    """Assert-style tests run against the candidate: `passed` comes from the tests' own process."""

    passed: bool
    error: str | None
    tests: SandboxResult
    candidate: SandboxResult


# --- the three runs ------------------------------------------------------------------------------


async def run_code_async(
    source: str,
    *,
    stdin: str | None = None,
    timeout_s: float | None = None,
    settings: SandboxSettings | None = None,
    output_limit: int | None = None,
) -> SandboxResult:
    """Run `source` as `__main__` in the sandbox and wait for it. Raises SandboxUnavailable where
    no isolation can be had (and `settings.unsafe` is not set). Cancelling it ends the run."""
    settings = settings or _DEFAULT
    iso = find_isolation(settings)
    timeout = _timeout(timeout_s, settings)
    started = await _start(
        iso,
        settings,
        "script",
        {"solution.py": source},
        timeout_s=timeout,
        output_limit=output_limit or settings.output_bytes,
        stdin=None if stdin is None else stdin.encode("utf-8"),
    )
    return await _finish(started, timeout)


async def run_functional_async(
    source: str,
    fn_name: str,
    cases: list[list[Any]],
    *,
    timeout_s: float | None = None,
    settings: SandboxSettings | None = None,
) -> tuple[SandboxResult, list[FunctionalOutcome]]:
    """Call `fn_name` (a function of the code, or a method of its class `Solution`) on each case's
    arguments, in order, stopping at the first error. The outcomes are what crossed the result
    pipe, decoded; a malformed one is dropped (the caller sees a missing case)."""
    settings = settings or _DEFAULT
    iso = find_isolation(settings)
    result_r, result_w = os.pipe()
    files = {"solution.py": source, "arguments.json": json.dumps(cases)}
    timeout = _timeout(timeout_s, settings)
    try:
        started = await _start(
            iso,
            settings,
            "functional",
            files,
            timeout_s=timeout,
            output_limit=settings.output_bytes,
            fds={"result_fd": result_w},
            extra={"fn_name": fn_name},
            reads={"result": result_r},
        )
    finally:
        _close(result_w)
    result = await _finish(started, timeout)
    outcomes = []
    for message in result.messages:
        try:
            if "error" in message:
                outcomes.append(FunctionalOutcome(int(message["case"]), error=str(message["error"])[:2000]))
            else:
                outcomes.append(FunctionalOutcome(int(message["case"]), _child.decode_value(message["value"])))
        except (TypeError, KeyError, ValueError, RecursionError):
            continue
    return result, outcomes


async def run_with_tests_async(
    source: str, tests: str, *, timeout_s: float | None = None, settings: SandboxSettings | None = None
) -> TestedResult:
    """Run `tests` (Python asserts that call the code's functions by name) against `source`, the
    two in separate sandboxes. Passed only when the tests' process ran to its end, said so on its
    verdict pipe, and exited cleanly."""
    settings = settings or _DEFAULT
    iso = find_isolation(settings)
    timeout = _timeout(timeout_s, settings)
    calls_r, calls_w = os.pipe()
    replies_r, replies_w = os.pipe()
    verdict_r, verdict_w = os.pipe()
    candidate = checker = None
    try:
        candidate = await _start(
            iso,
            settings,
            "serve",
            {"solution.py": source},
            timeout_s=timeout,
            output_limit=settings.output_bytes,
            fds={"calls_fd": calls_r, "replies_fd": replies_w},
        )
        checker = await _start(
            iso,
            settings,
            "tests",
            {"tests.py": tests},
            timeout_s=timeout,
            output_limit=settings.output_bytes,
            fds={"calls_fd": calls_w, "replies_fd": replies_r, "verdict_fd": verdict_w},
            reads={"result": verdict_r},
        )
    except BaseException:
        for started in (candidate, checker):
            if started is not None:
                await started.kill()
        if checker is None:
            _close(verdict_r)
        raise
    finally:
        for fd in (calls_r, calls_w, replies_r, replies_w, verdict_w):
            _close(fd)
    try:
        tests_result = await _finish(checker, timeout)
    finally:
        await candidate.kill()
    candidate_result = await _finish(candidate, 0.1, ended=True)
    verdict = tests_result.messages[-1] if tests_result.messages else None
    passed = tests_result.ok and isinstance(verdict, dict) and verdict.get("passed") is True
    error = None
    if not passed:
        said = verdict.get("error") if isinstance(verdict, dict) else None
        error = str(said)[:2000] if said else _why(tests_result) or "the tests did not run to the end"
    return TestedResult(passed, error, tests_result, candidate_result)


def run_code(source: str, **kwargs) -> SandboxResult:
    """`run_code_async`, waited for from synchronous code (in a thread of its own when this
    thread already runs an event loop)."""
    return run_sync(run_code_async(source, **kwargs))


def _timeout(timeout_s: float | None, settings: SandboxSettings) -> float:
    return float(timeout_s if timeout_s is not None else settings.timeout_s)
