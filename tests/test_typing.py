"""Type checking: mypy, strict on core, engine, store and runtime ([tool.mypy] in pyproject.toml).

The check itself runs the configured `python -m mypy` as CI does, from a cold cache. The configuration
is also read through mypy's own parser, so that "strict on these four" stays true: a module of each is
checked with every strict flag and its errors reported, and the rest of the package is not (yet).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STRICT = ["stiva_tui.core", "stiva_tui.engine", "stiva_tui.store", "stiva_tui.runtime"]


def _options_for(module: str, monkeypatch: pytest.MonkeyPatch):
    """mypy's options as `python -m mypy` at the root reads them (global, then for `module`)."""
    from mypy.main import process_options

    monkeypatch.chdir(ROOT)
    _, options = process_options([])
    return options, options.clone_for_module(module)


@pytest.mark.parametrize(
    "module", [f"{package}.{name}" for package, name in zip(STRICT, ["run_state", "executor", "db", "sessions"])]
)
def test_the_four_packages_are_checked_strictly(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    options, checked = _options_for(module, monkeypatch)
    assert options.files == [package.replace(".", "/") for package in STRICT]
    assert options.python_version == (3, 11)
    assert not checked.ignore_errors
    assert checked.disallow_untyped_defs and checked.disallow_incomplete_defs
    assert checked.disallow_any_generics and checked.disallow_untyped_calls
    assert checked.warn_return_any and checked.strict_equality and not checked.implicit_reexport
    assert options.warn_unused_ignores and options.warn_redundant_casts


def test_the_rest_of_the_package_is_read_but_not_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    _, other = _options_for("stiva_tui.tui.app", monkeypatch)
    assert other.ignore_errors and other.follow_imports == "normal"
    _, library = _options_for("torch.nn", monkeypatch)
    assert library.follow_imports == "skip"


@pytest.mark.slow
def test_mypy_strict_passes(tmp_path: Path) -> None:
    """The configured check, as CI runs it: `python -m mypy` at the root, nothing cached."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


# --- what the strict check found -------------------------------------------------------------------


class _PlainStream:
    """An AsyncIterator and nothing more (no `aclose`): all that the Worker protocol promises."""

    def __init__(self, events: list) -> None:
        self.events = iter(events)

    def __aiter__(self) -> _PlainStream:
        return self

    async def __anext__(self):
        try:
            return next(self.events)
        except StopIteration:
            raise StopAsyncIteration from None


class _PlainWorker:
    def __init__(self) -> None:
        self.calls = 0

    def stream_chat(self, model, messages, *, max_tokens=None, temperature=None, stop=None):
        from stiva_tui.core.usage import Usage
        from stiva_tui.pool.types import TextDelta, UsageReport

        self.calls += 1
        return _PlainStream([TextDelta("Paris."), UsageReport(Usage(5, 2))])


async def test_a_worker_whose_stream_is_a_plain_async_iterator_is_run() -> None:
    """The Worker protocol's stream_chat returns an AsyncIterator; the executor closed it with
    contextlib.aclosing, which needs `aclose` (only an async generator has one), so such a worker's
    step failed after its whole answer had arrived."""
    from stiva_tui.engine.baselines import direct_workflow
    from stiva_tui.engine.executor import Engine
    from stiva_tui.pool.types import PoolModel

    models = [PoolModel("m", "local", "m", "http://127.0.0.1:9/v1")]
    worker = _PlainWorker()
    result = await Engine(models, worker).run_workflow("What is the capital of France?", direct_workflow(), models)
    assert result.status == "finished", result
    assert result.answer == "Paris." and worker.calls == 1
